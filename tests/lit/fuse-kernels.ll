; The fuse-kernels pass (sirius.fusion.codegen.emit): two kernels fused horizontally into 128-thread
; blocks. `scale` (4 blocks of 128) gets blocks [0, 4); `tile_sum` (2 blocks of 64, a shared
; tile and a barrier) gets blocks [4, 6) and runs on 64 of the 128 threads, so its barrier
; becomes a counted one and its shared tile moves into the fused buffer.
;
; RUN: %python -m sirius.fusion.codegen.emit %s -O 0 --spec '{"name": "fused", "arrangement": "horizontal", "members": [{"kernel": "scale", "grid": [4, 1, 1], "block": [128, 1, 1]}, {"kernel": "tile_sum", "grid": [2, 1, 1], "block": [64, 1, 1]}]}' | filecheck %s
; RUN: %python -m sirius.fusion.codegen.emit %s --spec '{"name": "fused", "arrangement": "horizontal", "members": [{"kernel": "scale", "grid": [4, 1, 1], "block": [128, 1, 1]}, {"kernel": "tile_sum", "grid": [2, 1, 1], "block": [64, 1, 1]}]}' | filecheck %s --check-prefix=O3
;
; Rejected: a barrier under the global-linear-id map (a member block would span fused blocks),
; and a counted barrier over part of a warp.
; RUN: not %python -m sirius.fusion.codegen.emit %s --spec '{"name": "g", "arrangement": "vertical", "members": [{"kernel": "tile_sum", "grid": [2, 1, 1], "block": [64, 1, 1], "map": "global"}]}' 2>&1 | filecheck %s --check-prefix=GLOBAL
; RUN: not %python -m sirius.fusion.codegen.emit %s --spec '{"name": "w", "arrangement": "vertical", "members": [{"kernel": "scale", "grid": [4, 1, 1], "block": [128, 1, 1]}, {"kernel": "tile_sum", "grid": [2, 1, 1], "block": [40, 1, 1]}]}' 2>&1 | filecheck %s --check-prefix=WARP

target datalayout = "e-p6:32:32-i64:64-i128:128-i256:256-v16:16-v32:32-n16:32:64"
target triple = "nvptx64-nvidia-cuda"

@tile = internal addrspace(3) global [64 x float] undef, align 4

define ptx_kernel void @scale(ptr %x, i32 %n) #0 {
entry:
  %bid = call i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
  %dim = call i32 @llvm.nvvm.read.ptx.sreg.ntid.x()
  %tid = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  %base = mul i32 %bid, %dim
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

define ptx_kernel void @tile_sum(ptr %x, ptr %out) #0 {
entry:
  %tid = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  %bid = call i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
  %base = shl i32 %bid, 6
  %i = add i32 %base, %tid
  %idx = sext i32 %i to i64
  %p = getelementptr inbounds float, ptr %x, i64 %idx
  %v = load float, ptr %p, align 4
  %t = zext i32 %tid to i64
  %slot = getelementptr inbounds [64 x float], ptr addrspace(3) @tile, i64 0, i64 %t
  store float %v, ptr addrspace(3) %slot, align 4
  call void @llvm.nvvm.barrier.cta.sync.aligned.all(i32 0)
  %first = icmp eq i32 %tid, 0
  br i1 %first, label %sum, label %done
sum:
  %a = load float, ptr addrspace(3) @tile, align 4
  %last = getelementptr inbounds [64 x float], ptr addrspace(3) @tile, i64 0, i64 63
  %b = load float, ptr addrspace(3) %last, align 4
  %s = fadd float %a, %b
  %bidx = sext i32 %bid to i64
  %q = getelementptr inbounds float, ptr %out, i64 %bidx
  store float %s, ptr %q, align 4
  br label %done
done:
  ret void
}

declare i32 @llvm.nvvm.read.ptx.sreg.tid.x()
declare i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
declare i32 @llvm.nvvm.read.ptx.sreg.ntid.x()
declare void @llvm.nvvm.barrier.cta.sync.aligned.all(i32)

attributes #0 = { convergent nounwind "target-cpu"="sm_80" "target-features"="+ptx80,+sm_80" }

; The fragments: internal, the twelve id parameters appended, sreg reads replaced by them.
; CHECK: @fused.smem = internal addrspace(3) global [256 x i8] undef, align 16
; CHECK-LABEL: define internal void @fused.m0(ptr %x, i32 %n, i32 noundef %__sirius.tid.x, i32 noundef %__sirius.tid.y, i32 noundef %__sirius.tid.z, i32 noundef %__sirius.ctaid.x, i32 noundef %__sirius.ctaid.y, i32 noundef %__sirius.ctaid.z, i32 noundef %__sirius.ntid.x, i32 noundef %__sirius.ntid.y, i32 noundef %__sirius.ntid.z, i32 noundef %__sirius.nctaid.x, i32 noundef %__sirius.nctaid.y, i32 noundef %__sirius.nctaid.z) #{{[0-9]+}} {
; CHECK-NEXT: entry:
; CHECK-NEXT: %bid = add i32 %__sirius.ctaid.x, 0
; CHECK-NEXT: %dim = add i32 %__sirius.ntid.x, 0
; CHECK-NEXT: %tid = add i32 %__sirius.tid.x, 0
; CHECK-LABEL: define internal void @fused.m1(ptr %x, ptr %out,
; CHECK-NOT: llvm.nvvm.read.ptx.sreg
; CHECK: %slot = getelementptr inbounds [64 x float], ptr addrspace(3) @fused.smem, i64 0, i64 %t
; CHECK-NEXT: store float %v, ptr addrspace(3) %slot
; CHECK-NEXT: call void @llvm.nvvm.barrier.cta.sync.count(i32 1, i32 64)
; CHECK-NOT: aligned
; CHECK: getelementptr inbounds [64 x float], ptr addrspace(3) @fused.smem, i64 0, i64 63
;
; The kernel: blocks [0, 4) run scale with their own block id, [4, 6) run tile_sum on threads
; 0..63 with block id - 4; the parameters are both members' (the two x's stay apart). Its sreg
; reads carry the ranges of the one launch shape it is generated for.
; CHECK-LABEL: define dso_local ptx_kernel void @fused(ptr %x, i32 %n, ptr %x.2, ptr %out) #{{[0-9]+}} {
; CHECK: %[[TID:tidx[0-9]+]] = call range(i32 0, 128) i32 @llvm.nvvm.read.ptx.sreg.tid.x()
; CHECK: %[[BID:ctaidx[0-9]+]] = call range(i32 0, 6) i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
; the dispatch: a switch on the block index (a grid of 6 blocks: blocks 0-3 run the first
; member, 4-5 the second, anything else nothing)
; CHECK: switch i32 %[[BID]], label %exit [
; CHECK-NEXT: i32 0, label %m0
; CHECK-NEXT: i32 1, label %m0
; CHECK-NEXT: i32 2, label %m0
; CHECK-NEXT: i32 3, label %m0
; CHECK-NEXT: i32 4, label %m1
; CHECK-NEXT: i32 5, label %m1
; CHECK-NEXT: ]
; CHECK: %[[REL0:rel[0-9]+]] = sub i32 %[[BID]], 0
; CHECK-NEXT: call void @fused.m0(ptr %x, i32 %n, i32 %[[TID]], i32 0, i32 0, i32 %[[REL0]], i32 0, i32 0, i32 128, i32 1, i32 1, i32 4, i32 1, i32 1)
; CHECK: %[[REL1:rel[0-9]+]] = sub i32 %[[BID]], 4
; CHECK-NEXT: %[[OK:ok[0-9]+]] = icmp slt i32 %[[TID]], 64
; CHECK-NEXT: br i1 %[[OK]], label %m1.run, label %exit
; CHECK: call void @fused.m1(ptr %x.2, ptr %out, i32 %[[TID]], i32 0, i32 0, i32 %[[REL1]], i32 0, i32 0, i32 64, i32 1, i32 1, i32 2, i32 1, i32 1)
; CHECK: attributes #{{[0-9]+}} = { alwaysinline convergent nounwind "target-cpu"="sm_80"
; CHECK: attributes #{{[0-9]+}} = { {{.*}}"nvvm.maxntid"="128" "target-cpu"="sm_80"

; After O3 the fragments are inlined and gone; the counted barrier stays.
; O3-NOT: define internal void @fused.m
; O3-LABEL: define dso_local ptx_kernel void @fused(
; O3-NOT: call void @fused.m
; O3: tail call void @llvm.nvvm.barrier.cta.sync.count(i32 1, i32 64)
; O3: ret void

; GLOBAL: error: g: member 0 (tile_sum): uses barriers and shared memory, which need its blocks intact; a global thread map spreads a member block over fused blocks (use the block map)

; WARP: error: w: member 1 (tile_sum): has barriers and runs on 40 of the 128 threads of a block, not whole warps; counted barriers need a multiple of 32 threads
