; The common-base pass (sirius/postopt/common_base.py): in both launches of @k (the HOST line
; below, read with --host) the second pointer points 4096 bytes after the first, into the same
; buffer (d_w in one launch, d_v in the other). The kernel becomes a wrapper that derives the
; second pointer from the first and calls the body; after llvm-opt every load goes through the
; first pointer at a constant distance, and the second parameter is unused.
;
; RUN: sed -n 's/^; HOST: //p' %s > %t.json
; RUN: sed -n 's/^; HOST2: //p' %s > %t.moved.json
; RUN: sed '/^;/d' %s | %sirius opt - --host %t.json -p common-base | filecheck %s
; RUN: sed '/^;/d' %s | %sirius opt - --host %t.json -p 'common-base,llvm-opt' | filecheck %s --check-prefix=OPT
;
; Refused: a bare file (no host program). Left alone: launches at different distances (HOST2:
; 4096 bytes in one launch, 8192 in the other).
; RUN: sed '/^;/d' %s | not %sirius opt - -p common-base 2>&1 | filecheck %s --check-prefix=BARE
; RUN: sed '/^;/d' %s | %sirius opt - --host %t.moved.json -p common-base | filecheck %s --check-prefix=MOVED
;
; CHECK-LABEL: define internal void @k.sirius.cb(ptr noalias %w, ptr noalias %u, ptr noalias %o, i32 %n) alwaysinline #0
; CHECK-LABEL: define ptx_kernel void @k(ptr noalias %a0, ptr noalias %a1, ptr noalias %a2, i32 %a3) #0 {
; CHECK-NEXT:    %cb1 = getelementptr inbounds i8, ptr %a0, i64 4096
; CHECK-NEXT:    call void @k.sirius.cb(ptr %a0, ptr %cb1, ptr %a2, i32 %a3)
;
; OPT:         define ptx_kernel void @k({{.*}} readnone {{.*}}%a1,
; OPT-NOT:     %a1
; OPT:         getelementptr {{.*}}i64 4096
; OPT-NOT:     %a1
; OPT:         ret void
;
; BARE: error: pass common-base needs the fused host program
; MOVED-NOT: sirius.cb
; MOVED: define ptx_kernel void @k(ptr noalias %w, ptr noalias %u, ptr noalias %o, i32 %n) #0 {
; MOVED-NOT: sirius.cb

; HOST: {"schema":"sirius-host/1","program":{"_":"HostProgram","entry":"main","buffers":[{"_":"Buffer","id":0,"name":"d_w","bytes":16384,"role":"input"},{"_":"Buffer","id":1,"name":"d_v","bytes":16384,"role":"input"},{"_":"Buffer","id":2,"name":"d_o","bytes":4096,"role":"output"}],"ops":[{"_":"Launch","kernel":"k","mangled":"k","grid":[{"c":8},{"c":1},{"c":1}],"block":[{"c":128},{"c":1},{"c":1}],"smem":{"c":0},"args":[{"_":"BufferArg","address":{"_":"DevRef","buffer":"d_w"}},{"_":"BufferArg","address":{"_":"DevRef","buffer":"d_w","offset":{"c":4096}}},{"_":"BufferArg","address":{"_":"DevRef","buffer":"d_o"}},{"_":"ScalarArg","type":"i32","value":{"c":0,"t":[["t",1]]}}]},{"_":"Launch","kernel":"k","mangled":"k","grid":[{"c":8},{"c":1},{"c":1}],"block":[{"c":128},{"c":1},{"c":1}],"smem":{"c":0},"args":[{"_":"BufferArg","address":{"_":"DevRef","buffer":"d_v"}},{"_":"BufferArg","address":{"_":"DevRef","buffer":"d_v","offset":{"c":4096}}},{"_":"BufferArg","address":{"_":"DevRef","buffer":"d_o"}},{"_":"ScalarArg","type":"i32","value":{"c":0,"t":[["t",1]]}}]}]}}
; HOST2: {"schema":"sirius-host/1","program":{"_":"HostProgram","entry":"main","buffers":[{"_":"Buffer","id":0,"name":"d_w","bytes":16384,"role":"input"},{"_":"Buffer","id":1,"name":"d_v","bytes":16384,"role":"input"},{"_":"Buffer","id":2,"name":"d_o","bytes":4096,"role":"output"}],"ops":[{"_":"Launch","kernel":"k","mangled":"k","grid":[{"c":8},{"c":1},{"c":1}],"block":[{"c":128},{"c":1},{"c":1}],"smem":{"c":0},"args":[{"_":"BufferArg","address":{"_":"DevRef","buffer":"d_w"}},{"_":"BufferArg","address":{"_":"DevRef","buffer":"d_w","offset":{"c":4096}}},{"_":"BufferArg","address":{"_":"DevRef","buffer":"d_o"}},{"_":"ScalarArg","type":"i32","value":{"c":0,"t":[["t",1]]}}]},{"_":"Launch","kernel":"k","mangled":"k","grid":[{"c":8},{"c":1},{"c":1}],"block":[{"c":128},{"c":1},{"c":1}],"smem":{"c":0},"args":[{"_":"BufferArg","address":{"_":"DevRef","buffer":"d_v"}},{"_":"BufferArg","address":{"_":"DevRef","buffer":"d_v","offset":{"c":8192}}},{"_":"BufferArg","address":{"_":"DevRef","buffer":"d_o"}},{"_":"ScalarArg","type":"i32","value":{"c":0,"t":[["t",1]]}}]}]}}

target datalayout = "e-p6:32:32-i64:64-i128:128-i256:256-v16:16-v32:32-n16:32:64"
target triple = "nvptx64-nvidia-cuda"

define ptx_kernel void @k(ptr noalias %w, ptr noalias %u, ptr noalias %o, i32 %n) #0 {
entry:
  %ctaid = call i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
  %ntid = call i32 @llvm.nvvm.read.ptx.sreg.ntid.x()
  %tid = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  %base = mul i32 %ctaid, %ntid
  %i = add i32 %base, %tid
  %j = sext i32 %i to i64
  %pw = getelementptr inbounds float, ptr %w, i64 %j
  %pu = getelementptr inbounds float, ptr %u, i64 %j
  %x = load float, ptr %pw, align 4
  %y = load float, ptr %pu, align 4
  %z = fadd float %x, %y
  %po = getelementptr inbounds float, ptr %o, i64 %j
  store float %z, ptr %po, align 4
  ret void
}

declare i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
declare i32 @llvm.nvvm.read.ptx.sreg.ntid.x()
declare i32 @llvm.nvvm.read.ptx.sreg.tid.x()

attributes #0 = { "target-cpu"="sm_80" }
