; The contract pass (sirius/postopt/contract.py): stores to a temporary that nothing reads are
; removed. The host program (the HOST line below, read with --host) allocates x (input), y
; (output, copied back) and the temporaries t, u, w, and launches four kernels (8 x 128
; threads, n = 1000); each kernel is what `llvm-opt` leaves of a vertical fusion:
;   @chain:   t[i] = 2 x[i]; y[i] = t[i]^2, the load of t[i] already forwarded: t is only
;             stored to and nothing else names t (but a memset): its stores go
;   @reread:  u[i] = 2 x[i]; y[i] = u[i + 1]: a load through u remains (another thread's
;             element): kept
;   @chain2:  as @chain with w, but the later launch @reads_w reads w: kept
;
; RUN: sed -n 's/^; HOST: //p' %s > %t.json
; RUN: sed '/^;/d' %s | %sirius opt - --host %t.json -p contract | filecheck %s
;
; Rejected: a bare file (no host program).
; RUN: sed '/^;/d' %s | not %sirius opt - -p contract 2>&1 | filecheck %s --check-prefix=BARE
;
; CHECK-LABEL: define ptx_kernel void @chain(ptr noalias %x, ptr noalias %t, i32 %n, ptr noalias %y)
; CHECK-NOT: %pt =
; CHECK-NOT: store float %v, ptr %pt
; CHECK: store float %sq, ptr %py
; CHECK-LABEL: define ptx_kernel void @reread(
; CHECK: store float %v, ptr %pu
; CHECK: load float, ptr %pu1
; CHECK-LABEL: define ptx_kernel void @chain2(
; CHECK: store float %v, ptr %pw
; CHECK-LABEL: define ptx_kernel void @reads_w(
;
; BARE: error: pass contract needs the fused host program

; HOST: {"schema":"sirius-host/1","program":{"_":"HostProgram","entry":"main","buffers":[{"_":"Buffer","id":0,"name":"x","bytes":4096,"role":"input"},{"_":"Buffer","id":1,"name":"t","bytes":4096,"role":"temp"},{"_":"Buffer","id":2,"name":"y","bytes":4096,"role":"output"},{"_":"Buffer","id":3,"name":"u","bytes":4096,"role":"temp"},{"_":"Buffer","id":4,"name":"w","bytes":4096,"role":"temp"}],"ops":[{"_":"Alloc","buffer":"x","bytes":4096},{"_":"Alloc","buffer":"t","bytes":4096},{"_":"Alloc","buffer":"y","bytes":4096},{"_":"Alloc","buffer":"u","bytes":4096},{"_":"Alloc","buffer":"w","bytes":4096},{"_":"Copy","kind":"H2D","dst":{"_":"DevRef","buffer":"x"},"src":{"_":"HostRef","name":"h"},"bytes":{"c":4096}},{"_":"Memset","dst":{"_":"DevRef","buffer":"t"},"value":0,"bytes":{"c":4096}},{"_":"Launch","kernel":"chain","mangled":"chain","grid":[{"c":8},{"c":1},{"c":1}],"block":[{"c":128},{"c":1},{"c":1}],"smem":{"c":0},"args":[{"_":"BufferArg","address":{"_":"DevRef","buffer":"x"}},{"_":"BufferArg","address":{"_":"DevRef","buffer":"t"}},{"_":"ScalarArg","type":"i32","value":{"c":1000}},{"_":"BufferArg","address":{"_":"DevRef","buffer":"y"}}]},{"_":"Launch","kernel":"reread","mangled":"reread","grid":[{"c":8},{"c":1},{"c":1}],"block":[{"c":128},{"c":1},{"c":1}],"smem":{"c":0},"args":[{"_":"BufferArg","address":{"_":"DevRef","buffer":"x"}},{"_":"BufferArg","address":{"_":"DevRef","buffer":"u"}},{"_":"ScalarArg","type":"i32","value":{"c":1000}},{"_":"BufferArg","address":{"_":"DevRef","buffer":"y"}}]},{"_":"Launch","kernel":"chain2","mangled":"chain2","grid":[{"c":8},{"c":1},{"c":1}],"block":[{"c":128},{"c":1},{"c":1}],"smem":{"c":0},"args":[{"_":"BufferArg","address":{"_":"DevRef","buffer":"x"}},{"_":"BufferArg","address":{"_":"DevRef","buffer":"w"}},{"_":"ScalarArg","type":"i32","value":{"c":1000}},{"_":"BufferArg","address":{"_":"DevRef","buffer":"y"}}]},{"_":"Launch","kernel":"reads_w","mangled":"reads_w","grid":[{"c":8},{"c":1},{"c":1}],"block":[{"c":128},{"c":1},{"c":1}],"smem":{"c":0},"args":[{"_":"BufferArg","address":{"_":"DevRef","buffer":"w"}},{"_":"BufferArg","address":{"_":"DevRef","buffer":"y"}},{"_":"ScalarArg","type":"i32","value":{"c":1000}},{"_":"BufferArg","address":{"_":"DevRef","buffer":"y"}}]},{"_":"Copy","kind":"D2H","dst":{"_":"HostRef","name":"h"},"src":{"_":"DevRef","buffer":"y"},"bytes":{"c":4096}},{"_":"Free","address":{"_":"DevRef","buffer":"x"}},{"_":"Free","address":{"_":"DevRef","buffer":"t"}},{"_":"Free","address":{"_":"DevRef","buffer":"y"}},{"_":"Free","address":{"_":"DevRef","buffer":"u"}},{"_":"Free","address":{"_":"DevRef","buffer":"w"}}]}}

target datalayout = "e-p6:32:32-i64:64-i128:128-i256:256-v16:16-v32:32-n16:32:64"
target triple = "nvptx64-nvidia-cuda"

define ptx_kernel void @chain(ptr noalias %x, ptr noalias dereferenceable(4000) %t, i32 %n, ptr noalias %y) {
entry:
  %i = call i32 @index()
  %in = icmp slt i32 %i, %n
  br i1 %in, label %body, label %done

body:
  %j = sext i32 %i to i64
  %px = getelementptr inbounds float, ptr %x, i64 %j
  %pt = getelementptr inbounds float, ptr %t, i64 %j
  %py = getelementptr inbounds float, ptr %y, i64 %j
  %a = load float, ptr %px, align 4
  %v = fmul float %a, 2.0
  store float %v, ptr %pt, align 4
  %sq = fmul float %v, %v
  store float %sq, ptr %py, align 4
  br label %done

done:
  ret void
}

define ptx_kernel void @reread(ptr noalias %x, ptr noalias %u, i32 %n, ptr noalias %y) {
entry:
  %i = call i32 @index()
  %in = icmp slt i32 %i, %n
  br i1 %in, label %body, label %done

body:
  %j = sext i32 %i to i64
  %px = getelementptr inbounds float, ptr %x, i64 %j
  %pu = getelementptr inbounds float, ptr %u, i64 %j
  %pu1 = getelementptr inbounds float, ptr %pu, i64 1
  %py = getelementptr inbounds float, ptr %y, i64 %j
  %a = load float, ptr %px, align 4
  %v = fmul float %a, 2.0
  store float %v, ptr %pu, align 4
  %b = load float, ptr %pu1, align 4
  store float %b, ptr %py, align 4
  br label %done

done:
  ret void
}

define ptx_kernel void @chain2(ptr noalias %x, ptr noalias %w, i32 %n, ptr noalias %y) {
entry:
  %i = call i32 @index()
  %j = sext i32 %i to i64
  %px = getelementptr inbounds float, ptr %x, i64 %j
  %pw = getelementptr inbounds float, ptr %w, i64 %j
  %py = getelementptr inbounds float, ptr %y, i64 %j
  %a = load float, ptr %px, align 4
  %v = fmul float %a, 2.0
  store float %v, ptr %pw, align 4
  store float %v, ptr %py, align 4
  ret void
}

define ptx_kernel void @reads_w(ptr noalias %w, ptr %y2, i32 %n, ptr %y) {
entry:
  %i = call i32 @index()
  %j = sext i32 %i to i64
  %pw = getelementptr inbounds float, ptr %w, i64 %j
  %py = getelementptr inbounds float, ptr %y, i64 %j
  %a = load float, ptr %pw, align 4
  store float %a, ptr %py, align 4
  ret void
}

define internal i32 @index() {
  %b = call i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
  %d = call i32 @llvm.nvvm.read.ptx.sreg.ntid.x()
  %t = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  %m = mul i32 %b, %d
  %i = add i32 %m, %t
  ret i32 %i
}

declare i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
declare i32 @llvm.nvvm.read.ptx.sreg.ntid.x()
declare i32 @llvm.nvvm.read.ptx.sreg.tid.x()
