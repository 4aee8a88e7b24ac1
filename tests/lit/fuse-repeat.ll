; A repeated member (sirius.fusion.codegen.emit): `scale` launched 3 times, 4 blocks each, the
; k-th launch with `x` 512*k bytes further and `n` 10*k larger (a host loop's iterations), is
; one member of 12 blocks: each block computes its repetition (block / 4), its block within it
; (block % 4) and its arguments; the member's code is in the kernel once.
;
; RUN: %python -m sirius.fusion.codegen.emit %s -O 0 --spec '{"name": "rep", "arrangement": "horizontal", "members": [{"kernel": "scale", "grid": [4, 1, 1], "block": [128, 1, 1], "repeat": 3, "strides": [512, 10]}]}' | filecheck %s
; Rejected: a repeated member in a vertical kernel, and strides that do not match the parameters.
; RUN: not %python -m sirius.fusion.codegen.emit %s --spec '{"name": "v", "arrangement": "vertical", "members": [{"kernel": "scale", "grid": [4, 1, 1], "block": [128, 1, 1], "repeat": 3, "strides": [512, 10]}]}' 2>&1 | filecheck %s --check-prefix=BAD
; RUN: not %python -m sirius.fusion.codegen.emit %s --spec '{"name": "s", "arrangement": "horizontal", "members": [{"kernel": "scale", "grid": [4, 1, 1], "block": [128, 1, 1], "repeat": 3, "strides": [512]}]}' 2>&1 | filecheck %s --check-prefix=BAD

target datalayout = "e-p6:32:32-i64:64-i128:128-i256:256-v16:16-v32:32-n16:32:64"
target triple = "nvptx64-nvidia-cuda"

define ptx_kernel void @scale(ptr %x, i32 %n) #0 {
entry:
  %bid = call i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
  %tid = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  %base = shl i32 %bid, 7
  %i = add i32 %base, %tid
  %in = icmp slt i32 %i, %n
  br i1 %in, label %body, label %done
body:
  %idx = sext i32 %i to i64
  %p = getelementptr inbounds float, ptr %x, i64 %idx
  %v = load float, ptr %p, align 4
  %w = fmul float %v, 2.0
  store float %w, ptr %p, align 4
  br label %done
done:
  ret void
}

declare i32 @llvm.nvvm.read.ptx.sreg.tid.x()
declare i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()

attributes #0 = { convergent nounwind "target-cpu"="sm_80" "target-features"="+ptx80,+sm_80" }

; CHECK-LABEL: define dso_local ptx_kernel void @rep(ptr %x, i32 %n)
; CHECK: %[[BID:ctaidx[0-9]+]] = call range(i32 0, 12) i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
; CHECK: switch i32 %[[BID]], label %exit [
; CHECK: i32 11, label %m0
; CHECK-NEXT: ]
; CHECK: m0:
; CHECK-NEXT: %[[REL:rel[0-9]+]] = sub i32 %[[BID]], 0
; CHECK-NEXT: %[[REP:rep[0-9]+]] = udiv i32 %[[REL]], 4
; CHECK-NEXT: %[[LOCAL:rel[0-9]+]] = urem i32 %[[REL]], 4
; CHECK-NEXT: %[[W:rep[0-9]+]] = zext i32 %[[REP]] to i64
; CHECK-NEXT: %[[OFF:off[0-9]+]] = mul i64 %[[W]], 512
; CHECK-NEXT: %[[X:arg[0-9]+]] = getelementptr i8, ptr %x, i64 %[[OFF]]
; CHECK-NEXT: %[[OFFN:off[0-9]+]] = mul i32 %[[REP]], 10
; CHECK-NEXT: %[[N:arg[0-9]+]] = add i32 %n, %[[OFFN]]
; CHECK-NEXT: call void @rep.m0(ptr %[[X]], i32 %[[N]], i32 %{{tidx[0-9]+}}, i32 0, i32 0, i32 %[[LOCAL]], i32 0, i32 0, i32 128, i32 1, i32 1, i32 4, i32 1, i32 1)
; CHECK-NOT: call void @rep.m0

; BAD: repeats 3 times; a repeated member is horizontal, has the block map, and gives one stride per parameter (2)
