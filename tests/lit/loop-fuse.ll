; The loop-fuse pass (sirius/postopt/loop_fuse.py): LLVM's loop fusion on functions whose
; threads do not communicate. In @k the two adjacent loops over the same n elements merge into
; one, and the llvm-opt round after it loads x[i] once per iteration (the second loop's
; load of x[j] is gone; without loop-fuse it stays); @k_barrier has the same
; loops after a __syncthreads and is left as it is (a single-thread proof does not cover a
; kernel whose threads synchronise; LLVM alone would fuse them: the last RUN line).
;
; RUN: %sirius opt %s -p loop-fuse | filecheck %s
; RUN: %sirius opt %s -p loop-fuse,'llvm-opt{level=1,rounds=1}' | filecheck %s --check-prefix=OPT
; RUN: %sirius opt %s -p 'llvm-opt{level=1,rounds=1}' | filecheck %s --check-prefix=NOFUSE
; RUN: opt-22 -S -passes='function(loop-fusion)' %s | filecheck %s --check-prefix=LLVM
;
; Rejected: a module for another target.
; RUN: sed -e 's/nvptx64-nvidia-cuda/x86_64-unknown-linux-gnu/' %s | not %sirius opt - -p loop-fuse 2>&1 | filecheck %s --check-prefix=TRIPLE

target datalayout = "e-p6:32:32-i64:64-i128:128-i256:256-v16:16-v32:32-n16:32:64"
target triple = "nvptx64-nvidia-cuda"

define ptx_kernel void @k(ptr noalias %x, ptr noalias %a, ptr noalias %b, i64 %n) #0 {
entry:
  br label %l1

l1:
  %i = phi i64 [ 0, %entry ], [ %i.next, %l1 ]
  %px = getelementptr inbounds float, ptr %x, i64 %i
  %v = load float, ptr %px, align 4
  %pa = getelementptr inbounds float, ptr %a, i64 %i
  store float %v, ptr %pa, align 4
  %i.next = add nuw nsw i64 %i, 1
  %c = icmp ult i64 %i.next, %n
  br i1 %c, label %l1, label %mid, !llvm.loop !0

mid:
  br label %l2

l2:
  %j = phi i64 [ 0, %mid ], [ %j.next, %l2 ]
  %qx = getelementptr inbounds float, ptr %x, i64 %j
  %w = load float, ptr %qx, align 4
  %w2 = fmul float %w, 2.0
  %pb = getelementptr inbounds float, ptr %b, i64 %j
  store float %w2, ptr %pb, align 4
  %j.next = add nuw nsw i64 %j, 1
  %d = icmp ult i64 %j.next, %n
  br i1 %d, label %l2, label %exit, !llvm.loop !2

exit:
  ret void
}

define ptx_kernel void @k_barrier(ptr noalias %x, ptr noalias %a, ptr noalias %b, i64 %n) #0 {
entry:
  call void @llvm.nvvm.barrier0()
  br label %l1

l1:
  %i = phi i64 [ 0, %entry ], [ %i.next, %l1 ]
  %px = getelementptr inbounds float, ptr %x, i64 %i
  %v = load float, ptr %px, align 4
  %pa = getelementptr inbounds float, ptr %a, i64 %i
  store float %v, ptr %pa, align 4
  %i.next = add nuw nsw i64 %i, 1
  %c = icmp ult i64 %i.next, %n
  br i1 %c, label %l1, label %mid, !llvm.loop !3

mid:
  br label %l2

l2:
  %j = phi i64 [ 0, %mid ], [ %j.next, %l2 ]
  %qx = getelementptr inbounds float, ptr %x, i64 %j
  %w = load float, ptr %qx, align 4
  %w2 = fmul float %w, 2.0
  %pb = getelementptr inbounds float, ptr %b, i64 %j
  store float %w2, ptr %pb, align 4
  %j.next = add nuw nsw i64 %j, 1
  %d = icmp ult i64 %j.next, %n
  br i1 %d, label %l2, label %exit, !llvm.loop !4

exit:
  ret void
}

declare void @llvm.nvvm.barrier0() #1

attributes #0 = { "target-cpu"="sm_80" "target-features"="+ptx70" }
attributes #1 = { convergent nocallback nounwind }

!0 = distinct !{!0, !1}
!1 = !{!"llvm.loop.mustprogress"}
!2 = distinct !{!2, !1}
!3 = distinct !{!3, !1}
!4 = distinct !{!4, !1}

; CHECK-LABEL: define ptx_kernel void @k(
; CHECK: !llvm.loop
; CHECK-NOT: !llvm.loop
; CHECK-LABEL: define ptx_kernel void @k_barrier(
; CHECK: call void @llvm.nvvm.barrier
; CHECK: br i1 %c, label %l1, label %mid, !llvm.loop
; CHECK: br i1 %d, label %l2, label %exit, !llvm.loop
; CHECK-NOT: optnone
;
; OPT-LABEL: define ptx_kernel void @k(
; OPT: %v = load float
; OPT-NOT: %w{{[.a-z0-9]*}} = load float
; OPT-LABEL: define ptx_kernel void @k_barrier(
;
; NOFUSE-LABEL: define ptx_kernel void @k(
; NOFUSE: %w{{[.a-z0-9]*}} = load float
; NOFUSE-LABEL: define ptx_kernel void @k_barrier(
;
; TRIPLE: loop-fuse: {{.*}} targets x86_64-unknown-linux-gnu

; LLVM-LABEL: define ptx_kernel void @k_barrier(
; LLVM: !llvm.loop
; LLVM-NOT: !llvm.loop
