; The contract-shared pass (sirius/postopt/contract_shared.py): a temporary that one kernel writes
; and reads back within each block, after a barrier, moves into the block's shared memory. The
; host program (the HOST line below, read with --host) allocates x (input), y (output, copied
; back) and the temporaries t and u, memsets both, and launches two kernels (8 x 128 threads):
;   @blk: t[i] = 2 x[i]; barrier; y[i] = t[block's first + 127 - tid]: block b touches bytes
;         [512 b, 512 b + 512) of t only, reads only what it writes: t becomes 512 bytes of
;         shared memory per block, P = shared - 512 b
;   @rmw: u[i] = x[i] * u[i] (the memset's value, read before the barrier); barrier; the same
;         read: a load before the barrier, so u is kept
;
; RUN: sed -n 's/^; HOST: //p' %s > %t.json
; RUN: sed '/^;/d' %s | %sirius opt - --host %t.json -p contract-shared | filecheck %s
;
; CHECK: @__sirius_shared_t = internal addrspace(3) global [512 x i8] undef, align 16
; CHECK-NOT: @__sirius_shared_u
; CHECK-LABEL: define ptx_kernel void @blk(
; CHECK: %sirius.sh.mx = mul i64 %sirius.sh.bx, 512
; CHECK: %sirius.sh.p1 = getelementptr i8, ptr addrspacecast (ptr addrspace(3) @__sirius_shared_t to ptr), i64 %sirius.sh.o1
; CHECK: %pt = getelementptr float, ptr %sirius.sh.p1, i64 %ii
; CHECK: store float %w, ptr %pt
; CHECK: call void @llvm.nvvm.barrier0()
; CHECK: %pr = getelementptr float, ptr %sirius.sh.p1, i64 %jj
; CHECK-LABEL: define ptx_kernel void @rmw(
; CHECK-NOT: sirius.sh
; CHECK: %old = load float, ptr %pt
; CHECK: %pr = getelementptr inbounds float, ptr %t, i64 %jj

; HOST: {"schema":"sirius-host/1","program":{"_":"HostProgram","entry":"main","buffers":[{"_":"Buffer","id":0,"name":"x","bytes":4096,"role":"input"},{"_":"Buffer","id":1,"name":"t","bytes":4096,"role":"temp"},{"_":"Buffer","id":2,"name":"y","bytes":4096,"role":"output"},{"_":"Buffer","id":3,"name":"u","bytes":4096,"role":"temp"}],"ops":[{"_":"Alloc","buffer":"x","bytes":4096},{"_":"Alloc","buffer":"t","bytes":4096},{"_":"Alloc","buffer":"y","bytes":4096},{"_":"Alloc","buffer":"u","bytes":4096},{"_":"Copy","kind":"H2D","dst":{"_":"DevRef","buffer":"x"},"src":{"_":"HostRef","name":"h"},"bytes":{"c":4096}},{"_":"Memset","dst":{"_":"DevRef","buffer":"t"},"value":0,"bytes":{"c":4096}},{"_":"Memset","dst":{"_":"DevRef","buffer":"u"},"value":0,"bytes":{"c":4096}},{"_":"Launch","kernel":"blk","mangled":"blk","grid":[{"c":8},{"c":1},{"c":1}],"block":[{"c":128},{"c":1},{"c":1}],"smem":{"c":0},"args":[{"_":"BufferArg","address":{"_":"DevRef","buffer":"x"}},{"_":"BufferArg","address":{"_":"DevRef","buffer":"t"}},{"_":"BufferArg","address":{"_":"DevRef","buffer":"y"}}]},{"_":"Launch","kernel":"rmw","mangled":"rmw","grid":[{"c":8},{"c":1},{"c":1}],"block":[{"c":128},{"c":1},{"c":1}],"smem":{"c":0},"args":[{"_":"BufferArg","address":{"_":"DevRef","buffer":"x"}},{"_":"BufferArg","address":{"_":"DevRef","buffer":"u"}},{"_":"BufferArg","address":{"_":"DevRef","buffer":"y"}}]},{"_":"Copy","kind":"D2H","dst":{"_":"HostRef","name":"h"},"src":{"_":"DevRef","buffer":"y"},"bytes":{"c":4096}},{"_":"Free","address":{"_":"DevRef","buffer":"x"}},{"_":"Free","address":{"_":"DevRef","buffer":"t"}},{"_":"Free","address":{"_":"DevRef","buffer":"y"}},{"_":"Free","address":{"_":"DevRef","buffer":"u"}}]}}
target datalayout = "e-p6:32:32-i64:64-i128:128-i256:256-v16:16-v32:32-n16:32:64"
target triple = "nvptx64-nvidia-cuda"

define ptx_kernel void @blk(ptr noalias %x, ptr noalias %t, ptr noalias %y) {
entry:
  %tid = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  %bid = call i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
  %base = shl nuw nsw i32 %bid, 7
  %i = or disjoint i32 %base, %tid
  %ii = zext nneg i32 %i to i64
  %px = getelementptr inbounds nuw float, ptr %x, i64 %ii
  %v = load float, ptr %px, align 4
  %w = fmul float %v, 2.0
  %pt = getelementptr inbounds nuw float, ptr %t, i64 %ii
  store float %w, ptr %pt, align 4
  call void @llvm.nvvm.barrier0()
  %r = sub nsw i32 127, %tid
  %j = add nsw i32 %base, %r
  %jj = sext i32 %j to i64
  %pr = getelementptr inbounds float, ptr %t, i64 %jj
  %u = load float, ptr %pr, align 4
  %py = getelementptr inbounds nuw float, ptr %y, i64 %ii
  store float %u, ptr %py, align 4
  ret void
}

define ptx_kernel void @rmw(ptr noalias %x, ptr noalias %t, ptr noalias %y) {
entry:
  %tid = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  %bid = call i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
  %base = shl nuw nsw i32 %bid, 7
  %i = or disjoint i32 %base, %tid
  %ii = zext nneg i32 %i to i64
  %px = getelementptr inbounds nuw float, ptr %x, i64 %ii
  %v = load float, ptr %px, align 4
  %pt = getelementptr inbounds nuw float, ptr %t, i64 %ii
  %old = load float, ptr %pt, align 4
  %w = fmul float %v, %old
  store float %w, ptr %pt, align 4
  call void @llvm.nvvm.barrier0()
  %r = sub nsw i32 127, %tid
  %j = add nsw i32 %base, %r
  %jj = sext i32 %j to i64
  %pr = getelementptr inbounds float, ptr %t, i64 %jj
  %u = load float, ptr %pr, align 4
  %py = getelementptr inbounds nuw float, ptr %y, i64 %ii
  store float %u, ptr %py, align 4
  ret void
}

declare i32 @llvm.nvvm.read.ptx.sreg.tid.x()
declare i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
declare void @llvm.nvvm.barrier0()
