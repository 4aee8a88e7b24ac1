; contract-shared at THREAD width (sirius/postopt/contract_shared.py): a temporary each thread
; writes and then reads back itself, with no barrier between, moves into shared memory. The host
; program (the HOST line, read with --host) allocates x (input), y (output), t and u, and
; launches two kernels of one block of 128 threads:
;   @own:   t[i] = 2 x[i]; y[i] = t[i]: thread i reads only the byte it wrote, after writing
;           it; one block, so its slice needs no per-block base: t becomes 512 bytes of shared
;           memory (the default `thread=free`)
;   @cross: u[i] = 2 x[i]; y[i] = u[127 - i]: a thread reads what another thread wrote, with no
;           barrier between: u is kept
;
; RUN: sed -n 's/^; HOST: //p' %s > %t.json
; RUN: sed '/^;/d' %s | %sirius opt - --host %t.json -p contract-shared | filecheck %s
; RUN: sed '/^;/d' %s | %sirius opt - --host %t.json -p 'contract-shared{thread=off}' \
; RUN:   | filecheck %s --check-prefix=OFF
;
; CHECK: @__sirius_shared_t = internal addrspace(3) global [512 x i8] undef, align 16
; CHECK-NOT: @__sirius_shared_u
; CHECK-LABEL: define ptx_kernel void @own(
; CHECK: %sirius.sh.p1 = getelementptr i8, ptr addrspacecast (ptr addrspace(3) @__sirius_shared_t to ptr), i64 %sirius.sh.o1
; CHECK: %pt = getelementptr float, ptr %sirius.sh.p1, i64 %i
; CHECK: store float %w, ptr %pt
; CHECK: %r = load float, ptr %pt
; CHECK-LABEL: define ptx_kernel void @cross(
; CHECK-NOT: sirius.sh
; CHECK: %pr = getelementptr inbounds float, ptr %u, i64 %j
;
; OFF-NOT: __sirius_shared

; HOST: {"schema":"sirius-host/1","program":{"_":"HostProgram","entry":"main","buffers":[{"_":"Buffer","id":0,"name":"x","bytes":512,"role":"input"},{"_":"Buffer","id":1,"name":"t","bytes":512,"role":"temp"},{"_":"Buffer","id":2,"name":"y","bytes":4096,"role":"output"},{"_":"Buffer","id":3,"name":"u","bytes":512,"role":"temp"}],"ops":[{"_":"Alloc","buffer":"x","bytes":512},{"_":"Alloc","buffer":"t","bytes":512},{"_":"Alloc","buffer":"y","bytes":512},{"_":"Alloc","buffer":"u","bytes":512},{"_":"Copy","kind":"H2D","dst":{"_":"DevRef","buffer":"x"},"src":{"_":"HostRef","name":"h"},"bytes":{"c":512}},{"_":"Memset","dst":{"_":"DevRef","buffer":"t"},"value":0,"bytes":{"c":512}},{"_":"Memset","dst":{"_":"DevRef","buffer":"u"},"value":0,"bytes":{"c":512}},{"_":"Launch","kernel":"own","mangled":"own","grid":[{"c":1},{"c":1},{"c":1}],"block":[{"c":128},{"c":1},{"c":1}],"smem":{"c":0},"args":[{"_":"BufferArg","address":{"_":"DevRef","buffer":"x"}},{"_":"BufferArg","address":{"_":"DevRef","buffer":"t"}},{"_":"BufferArg","address":{"_":"DevRef","buffer":"y"}}]},{"_":"Launch","kernel":"cross","mangled":"cross","grid":[{"c":1},{"c":1},{"c":1}],"block":[{"c":128},{"c":1},{"c":1}],"smem":{"c":0},"args":[{"_":"BufferArg","address":{"_":"DevRef","buffer":"x"}},{"_":"BufferArg","address":{"_":"DevRef","buffer":"u"}},{"_":"BufferArg","address":{"_":"DevRef","buffer":"y"}}]},{"_":"Copy","kind":"D2H","dst":{"_":"HostRef","name":"h"},"src":{"_":"DevRef","buffer":"y"},"bytes":{"c":512}},{"_":"Free","address":{"_":"DevRef","buffer":"x"}},{"_":"Free","address":{"_":"DevRef","buffer":"t"}},{"_":"Free","address":{"_":"DevRef","buffer":"y"}},{"_":"Free","address":{"_":"DevRef","buffer":"u"}}]}}
target datalayout = "e-p6:32:32-i64:64-i128:128-i256:256-v16:16-v32:32-n16:32:64"
target triple = "nvptx64-nvidia-cuda"

declare i32 @llvm.nvvm.read.ptx.sreg.tid.x()

define ptx_kernel void @own(ptr %x, ptr %t, ptr %y) {
  %tid = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  %i = zext i32 %tid to i64
  %px = getelementptr inbounds float, ptr %x, i64 %i
  %v = load float, ptr %px, align 4
  %w = fmul float %v, 2.000000e+00
  %pt = getelementptr inbounds float, ptr %t, i64 %i
  store float %w, ptr %pt, align 4
  %r = load float, ptr %pt, align 4
  %py = getelementptr inbounds float, ptr %y, i64 %i
  store float %r, ptr %py, align 4
  ret void
}

define ptx_kernel void @cross(ptr %x, ptr %u, ptr %y) {
  %tid = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  %i = zext i32 %tid to i64
  %px = getelementptr inbounds float, ptr %x, i64 %i
  %v = load float, ptr %px, align 4
  %w = fmul float %v, 2.000000e+00
  %pu = getelementptr inbounds float, ptr %u, i64 %i
  store float %w, ptr %pu, align 4
  %j = sub i64 127, %i
  %pr = getelementptr inbounds float, ptr %u, i64 %j
  %r = load float, ptr %pr, align 4
  %py = getelementptr inbounds float, ptr %y, i64 %i
  store float %r, ptr %py, align 4
  ret void
}
