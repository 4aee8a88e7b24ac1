; The host-constants pass (sirius/postopt/host_constants.py): the host program (the HOST line
; below, read with --host) launches @k twice, both with n = 1000, blockDim 128 and gridDim 8,
; and with s = 0.5 and s = 2.0. The kernel becomes a wrapper calling its body with n and s as
; constants; the second value of s gets a clone (k_sirius_hc1); the body reads blockDim.x and
; gridDim.x as constants. After llvm-opt the index arithmetic is folded (a shift by 7).
;
; RUN: sed -n 's/^; HOST: //p' %s > %t.json
; RUN: sed '/^;/d' %s | %sirius opt - --host %t.json -p host-constants | filecheck %s
; RUN: sed '/^;/d' %s | %sirius opt - --host %t.json -p 'host-constants{max_clones=1}' | filecheck %s --check-prefix=ONE
; RUN: sed '/^;/d' %s | %sirius opt - --host %t.json -p 'host-constants,llvm-opt' | filecheck %s --check-prefix=OPT
;
; Rejected: a bare file (no host program), and an option value out of range.
; RUN: sed '/^;/d' %s | not %sirius opt - -p host-constants 2>&1 | filecheck %s --check-prefix=BARE
; RUN: sed '/^;/d' %s | not %sirius opt - --host %t.json -p 'host-constants{max_clones=0}' 2>&1 | filecheck %s --check-prefix=CLONES
;
; CHECK-LABEL: define internal void @k.sirius.body(ptr %x, i32 %n, float %s) alwaysinline #0
; CHECK:         %ntid = add i32 128, 0
; CHECK:         %nctaid = add i32 8, 0
; CHECK-NOT:     call i32 @llvm.nvvm.read.ptx.sreg.ntid.x()
; CHECK:         ret void
; CHECK-LABEL: define ptx_kernel void @k(ptr %a0, i32 %a1, float %a2) #0 {
; CHECK-NEXT:    call void @k.sirius.body(ptr %a0, i32 1000, float 0x3FE0000000000000)
; CHECK-LABEL: define ptx_kernel void @k_sirius_hc1(ptr %a0, i32 %a1, float %a2) #0 {
; CHECK-NEXT:    call void @k.sirius.body(ptr %a0, i32 1000, float 0x4000000000000000)
;
; ONE:      define ptx_kernel void @k(ptr %a0, i32 %a1, float %a2) #0 {
; ONE-NEXT:   call void @k.sirius.body(ptr %a0, i32 1000, float %a2)
; ONE-NOT:  @k_sirius_hc1
;
; OPT-LABEL: define ptx_kernel void @k(
; OPT:         shl {{.*}}i32 %{{.*}}, 7
; OPT:         icmp {{.*}}, 1000
; OPT:         fmul float %{{.*}}, 5.000000e-01
; OPT-LABEL: define ptx_kernel void @k_sirius_hc1(
; OPT:         fmul float %{{.*}}, 2.000000e+00
;
; BARE: error: pass host-constants needs the fused host program
; CLONES: error: host-constants: max_clones must be between 1 and 64, not 0

; HOST: {"schema":"sirius-host/1","program":{"_":"HostProgram","entry":"main","buffers":[{"_":"Buffer","id":0,"name":"d_x","bytes":4096,"role":"output"}],"ops":[{"_":"Alloc","buffer":"d_x","bytes":4096},{"_":"Launch","kernel":"k","mangled":"k","grid":[{"c":8},{"c":1},{"c":1}],"block":[{"c":128},{"c":1},{"c":1}],"smem":{"c":0},"args":[{"_":"BufferArg","address":{"_":"DevRef","buffer":"d_x"}},{"_":"ScalarArg","type":"i32","value":{"c":1000}},{"_":"ScalarArg","type":"float","value":0.5}]},{"_":"Launch","kernel":"k","mangled":"k","grid":[{"c":8},{"c":1},{"c":1}],"block":[{"c":128},{"c":1},{"c":1}],"smem":{"c":0},"args":[{"_":"BufferArg","address":{"_":"DevRef","buffer":"d_x"}},{"_":"ScalarArg","type":"i32","value":{"c":1000}},{"_":"ScalarArg","type":"float","value":2.0}]}]}}

target datalayout = "e-p6:32:32-i64:64-i128:128-i256:256-v16:16-v32:32-n16:32:64"
target triple = "nvptx64-nvidia-cuda"

define ptx_kernel void @k(ptr %x, i32 %n, float %s) #0 {
entry:
  %ctaid = call i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
  %ntid = call i32 @llvm.nvvm.read.ptx.sreg.ntid.x()
  %tid = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  %nctaid = call i32 @llvm.nvvm.read.ptx.sreg.nctaid.x()
  %base = mul i32 %ctaid, %ntid
  %i = add i32 %base, %tid
  %total = mul i32 %nctaid, %ntid
  %in = icmp slt i32 %i, %n
  %small = icmp slt i32 %i, %total
  %ok = and i1 %in, %small
  br i1 %ok, label %body, label %done

body:
  %j = sext i32 %i to i64
  %p = getelementptr inbounds float, ptr %x, i64 %j
  %v = load float, ptr %p, align 4
  %w = fmul float %v, %s
  store float %w, ptr %p, align 4
  br label %done

done:
  ret void
}

declare i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
declare i32 @llvm.nvvm.read.ptx.sreg.ntid.x()
declare i32 @llvm.nvvm.read.ptx.sreg.tid.x()
declare i32 @llvm.nvvm.read.ptx.sreg.nctaid.x()

attributes #0 = { "target-cpu"="sm_80" }
