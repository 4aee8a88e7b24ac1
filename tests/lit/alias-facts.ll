; The alias-facts pass (sirius/postopt/alias_facts.py): the host program (the HOST line below,
; read with --host) launches three kernels, each copying n = 1000 floats (x[i] to y[i]), with
; gridDim 8 and blockDim 128, so each reads bytes [0, 4000) from x and writes [0, 4000) from y:
;   @far:  x = d, y = d + 4096 bytes (one buffer, disjoint ranges)  -> noalias x and y
;   @near: x = d, y = d + 16 bytes   (one buffer, ranges overlap)   -> nothing
;   @apart: x = d, y = o             (two buffers)                  -> noalias x and y
;   @table: reads its source pointer from a table in memory          -> nothing
;   @synced: as @apart, with a __syncthreads: only x, which nothing writes (LLVM would take
;            the barrier for one that cannot touch a noalias y, across other threads' stores)
;
; RUN: sed -n 's/^; HOST: //p' %s > %t.json
; RUN: sed '/^;/d' %s | %sirius opt - --host %t.json -p alias-facts | filecheck %s
;
; Rejected: a bare file (no host program).
; RUN: sed '/^;/d' %s | not %sirius opt - -p alias-facts 2>&1 | filecheck %s --check-prefix=BARE
;
; CHECK: define ptx_kernel void @far(ptr noalias %x, ptr noalias %y, i32 %n)
; CHECK: define ptx_kernel void @near(ptr %x, ptr %y, i32 %n)
; CHECK: define ptx_kernel void @apart(ptr noalias %x, ptr noalias %y, i32 %n)
; CHECK: define ptx_kernel void @table(ptr %t, ptr %y, i32 %n)
; CHECK: define ptx_kernel void @synced(ptr noalias %x, ptr %y, i32 %n)
;
; BARE: error: pass alias-facts needs the fused host program

; HOST: {"schema":"sirius-host/1","program":{"_":"HostProgram","entry":"main","buffers":[{"_":"Buffer","id":0,"name":"d","bytes":8192,"role":"output"},{"_":"Buffer","id":1,"name":"o","bytes":4096,"role":"output"},{"_":"Buffer","id":2,"name":"t","bytes":8,"role":"input"}],"ops":[{"_":"Alloc","buffer":"d","bytes":8192},{"_":"Alloc","buffer":"o","bytes":4096},{"_":"Alloc","buffer":"t","bytes":8},{"_":"Launch","kernel":"far","mangled":"far","grid":[{"c":8},{"c":1},{"c":1}],"block":[{"c":128},{"c":1},{"c":1}],"smem":{"c":0},"args":[{"_":"BufferArg","address":{"_":"DevRef","buffer":"d"}},{"_":"BufferArg","address":{"_":"DevRef","buffer":"d","offset":{"c":4096}}},{"_":"ScalarArg","type":"i32","value":{"c":1000}}]},{"_":"Launch","kernel":"near","mangled":"near","grid":[{"c":8},{"c":1},{"c":1}],"block":[{"c":128},{"c":1},{"c":1}],"smem":{"c":0},"args":[{"_":"BufferArg","address":{"_":"DevRef","buffer":"d"}},{"_":"BufferArg","address":{"_":"DevRef","buffer":"d","offset":{"c":16}}},{"_":"ScalarArg","type":"i32","value":{"c":1000}}]},{"_":"Launch","kernel":"apart","mangled":"apart","grid":[{"c":8},{"c":1},{"c":1}],"block":[{"c":128},{"c":1},{"c":1}],"smem":{"c":0},"args":[{"_":"BufferArg","address":{"_":"DevRef","buffer":"d"}},{"_":"BufferArg","address":{"_":"DevRef","buffer":"o"}},{"_":"ScalarArg","type":"i32","value":{"c":1000}}]},{"_":"Launch","kernel":"table","mangled":"table","grid":[{"c":8},{"c":1},{"c":1}],"block":[{"c":128},{"c":1},{"c":1}],"smem":{"c":0},"args":[{"_":"BufferArg","address":{"_":"DevRef","buffer":"t"}},{"_":"BufferArg","address":{"_":"DevRef","buffer":"o"}},{"_":"ScalarArg","type":"i32","value":{"c":1000}}]},{"_":"Launch","kernel":"synced","mangled":"synced","grid":[{"c":8},{"c":1},{"c":1}],"block":[{"c":128},{"c":1},{"c":1}],"smem":{"c":0},"args":[{"_":"BufferArg","address":{"_":"DevRef","buffer":"d"}},{"_":"BufferArg","address":{"_":"DevRef","buffer":"o"}},{"_":"ScalarArg","type":"i32","value":{"c":1000}}]}]}}

target datalayout = "e-p6:32:32-i64:64-i128:128-i256:256-v16:16-v32:32-n16:32:64"
target triple = "nvptx64-nvidia-cuda"

define ptx_kernel void @far(ptr %x, ptr %y, i32 %n) #0 {
entry:
  %i = call i32 @index()
  %in = icmp slt i32 %i, %n
  br i1 %in, label %body, label %done

body:
  %j = sext i32 %i to i64
  %p = getelementptr inbounds float, ptr %x, i64 %j
  %q = getelementptr inbounds float, ptr %y, i64 %j
  %v = load float, ptr %p, align 4
  store float %v, ptr %q, align 4
  br label %done

done:
  ret void
}

define ptx_kernel void @near(ptr %x, ptr %y, i32 %n) #0 {
entry:
  %i = call i32 @index()
  %in = icmp slt i32 %i, %n
  br i1 %in, label %body, label %done

body:
  %j = sext i32 %i to i64
  %p = getelementptr inbounds float, ptr %x, i64 %j
  %q = getelementptr inbounds float, ptr %y, i64 %j
  %v = load float, ptr %p, align 4
  store float %v, ptr %q, align 4
  br label %done

done:
  ret void
}

define ptx_kernel void @apart(ptr %x, ptr %y, i32 %n) #0 {
entry:
  %i = call i32 @index()
  %in = icmp slt i32 %i, %n
  br i1 %in, label %body, label %done

body:
  %j = sext i32 %i to i64
  %p = getelementptr inbounds float, ptr %x, i64 %j
  %q = getelementptr inbounds float, ptr %y, i64 %j
  %v = load float, ptr %p, align 4
  store float %v, ptr %q, align 4
  br label %done

done:
  ret void
}

define ptx_kernel void @table(ptr %t, ptr %y, i32 %n) #0 {
entry:
  %i = call i32 @index()
  %in = icmp slt i32 %i, %n
  br i1 %in, label %body, label %done

body:
  %x = load ptr, ptr %t, align 8
  %j = sext i32 %i to i64
  %p = getelementptr inbounds float, ptr %x, i64 %j
  %q = getelementptr inbounds float, ptr %y, i64 %j
  %v = load float, ptr %p, align 4
  store float %v, ptr %q, align 4
  br label %done

done:
  ret void
}

define ptx_kernel void @synced(ptr %x, ptr %y, i32 %n) #0 {
entry:
  %i = call i32 @index()
  %in = icmp slt i32 %i, %n
  br i1 %in, label %body, label %done

body:
  %j = sext i32 %i to i64
  %p = getelementptr inbounds float, ptr %x, i64 %j
  %q = getelementptr inbounds float, ptr %y, i64 %j
  %v = load float, ptr %p, align 4
  store float %v, ptr %q, align 4
  br label %done

done:
  call void @llvm.nvvm.barrier0()
  ret void
}

; blockIdx.x * blockDim.x + threadIdx.x, inlined into each kernel before the analysis
define internal i32 @index() #1 {
  %ctaid = call i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
  %ntid = call i32 @llvm.nvvm.read.ptx.sreg.ntid.x()
  %tid = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  %base = mul i32 %ctaid, %ntid
  %i = add i32 %base, %tid
  ret i32 %i
}

declare i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
declare i32 @llvm.nvvm.read.ptx.sreg.ntid.x()
declare i32 @llvm.nvvm.read.ptx.sreg.tid.x()
declare void @llvm.nvvm.barrier0()

attributes #0 = { "target-cpu"="sm_80" }
attributes #1 = { alwaysinline "target-cpu"="sm_80" }
