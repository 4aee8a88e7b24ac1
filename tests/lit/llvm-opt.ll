; The llvm-opt pass (sirius/postopt/llvm_opt.py): LLVM's default<O{level}> pipeline on the NVPTX
; target machine, `rounds` times. At O3 the internal helper is inlined and removed, the unused
; function is removed, and the load after the store to the same element is forwarded; at O0 only
; the unused internal function goes (global dead-code elimination).
;
; RUN: %sirius opt %s -p llvm-opt | filecheck %s
; RUN: %sirius opt %s -p 'llvm-opt{level=3,rounds=1}' --verify-each | filecheck %s
; RUN: %sirius opt %s -p 'llvm-opt{level=0}' | filecheck %s --check-prefix=O0
; RUN: %sirius opt %s -p llvm-opt --print-after llvm-opt -o /dev/null 2>&1 | filecheck %s --check-prefix=DUMP
;
; Rejected: an option value outside its type, an option it does not have, and a module for
; another target.
; RUN: not %sirius opt %s -p 'llvm-opt{level=5}' 2>&1 | filecheck %s --check-prefix=LEVEL
; RUN: not %sirius opt %s -p 'llvm-opt{rounds=0}' 2>&1 | filecheck %s --check-prefix=ROUNDS
; RUN: not %sirius opt %s -p 'llvm-opt{speed=3}' 2>&1 | filecheck %s --check-prefix=OPTION
; RUN: sed -e 's/nvptx64-nvidia-cuda/x86_64-unknown-linux-gnu/' %s | not %sirius opt - -p llvm-opt 2>&1 | filecheck %s --check-prefix=TRIPLE

target datalayout = "e-p6:32:32-i64:64-i128:128-i256:256-v16:16-v32:32-n16:32:64"
target triple = "nvptx64-nvidia-cuda"

define internal float @twice(float %v) {
  %w = fmul float %v, 2.0
  ret float %w
}

define internal void @unused() {
  ret void
}

define ptx_kernel void @k(ptr %x, ptr %y) #0 {
entry:
  %tid = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  %i = zext i32 %tid to i64
  %p = getelementptr inbounds float, ptr %x, i64 %i
  %v = load float, ptr %p, align 4
  %w = call float @twice(float %v)
  store float %w, ptr %p, align 4
  %again = load float, ptr %p, align 4
  %q = getelementptr inbounds float, ptr %y, i64 %i
  store float %again, ptr %q, align 4
  ret void
}

declare i32 @llvm.nvvm.read.ptx.sreg.tid.x()

attributes #0 = { "target-cpu"="sm_80" "target-features"="+ptx70" }

; CHECK-NOT: define internal
; CHECK-LABEL: define ptx_kernel void @k(
; CHECK: load float
; CHECK-NEXT: %[[W:.+]] = fmul float %{{.+}}, 2.0
; CHECK-NEXT: store float %[[W]]
; CHECK-NOT: load
; CHECK: store float %[[W]]
; CHECK-NEXT: ret void

; O0: define internal float @twice(
; O0-NOT: @unused
; O0: define ptx_kernel void @k(
; O0: call float @twice(
; O0: %again = load float

; DUMP: ; *** IR Dump After llvm-opt{level=3,rounds=2} ({{.*}} s) ***
; DUMP: define ptx_kernel void @k(

; LEVEL: error: llvm-opt: bad value '5' for option level: expected one of 0, 1, 2, 3
; LEVEL-NEXT: llvm-opt{level=5}
; LEVEL-NEXT: {{^ +}}^

; ROUNDS: error: llvm-opt: rounds must be between 1 and 8, not 0

; OPTION: error: pass llvm-opt has no option 'speed'
; OPTION: note: options of llvm-opt: level: one of 0, 1, 2, 3 (default 3); rounds: an integer (default 2)

; TRIPLE: error: llvm-opt: <stdin> targets x86_64-unknown-linux-gnu; this pass runs LLVM's pipeline for NVPTX
