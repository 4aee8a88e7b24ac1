; The licm pass (sirius/postopt/licm.py): normalisation by loop depth, then LLVM's LICM.
; In @tree the sum (i + a) + b is regrouped as (a + b) + i, and a + b leaves the loop; in @addr
; the address x[zext(a + i)] becomes (x + a)[zext i], the inner address hoisted; in @cond the
; select c1 ? v : (c2 ? v : w) with invariant c1, c2 becomes (c1 || c2) ? v : w, the condition
; hoisted. LLVM's LICM alone (the last RUN line) regroups @tree too (LLVM 22's LICM reassociates
; add chains itself) but leaves the address and the conditions of @addr and @cond in the loop.
; @small has the same tree in a loop of 4 iterations and is left alone (small_trip); with
; small_trip=0 it is regrouped too. A threshold of 2 leaves @tree alone (it saves 1 add).
;
; RUN: %sirius opt %s -p licm | filecheck %s
; RUN: %sirius opt %s -p 'licm{small_trip=0}' | filecheck %s --check-prefix=SMALL
; RUN: %sirius opt %s -p 'licm{threshold=2}' | filecheck %s --check-prefix=K2
; RUN: opt-22 -S -passes='function(loop-simplify,lcssa,loop-mssa(licm))' %s | filecheck %s --check-prefix=LLVM
;
; Rejected: a module for another target.
; RUN: sed -e 's/nvptx64-nvidia-cuda/x86_64-unknown-linux-gnu/' %s | not %sirius opt - -p licm 2>&1 | filecheck %s --check-prefix=TRIPLE

target datalayout = "e-p6:32:32-i64:64-i128:128-i256:256-v16:16-v32:32-n16:32:64"
target triple = "nvptx64-nvidia-cuda"

define ptx_kernel void @tree(ptr noalias %out, i32 %a, i32 %b, i32 %n) {
entry:
  br label %loop

loop:
  %i = phi i32 [ 0, %entry ], [ %i.next, %loop ]
  %s1 = add i32 %i, %a
  %s2 = add i32 %s1, %b
  %p = getelementptr inbounds i32, ptr %out, i32 %i
  store i32 %s2, ptr %p, align 4
  %i.next = add nuw nsw i32 %i, 1
  %c = icmp ult i32 %i.next, %n
  br i1 %c, label %loop, label %exit

exit:
  ret void
}

define ptx_kernel void @addr(ptr noalias %x, ptr noalias %out, i32 %a, i32 %n) {
entry:
  br label %loop

loop:
  %i = phi i32 [ 0, %entry ], [ %i.next, %loop ]
  %acc = phi float [ 0.0, %entry ], [ %acc.next, %loop ]
  %k = add nuw i32 %a, %i
  %kz = zext i32 %k to i64
  %px = getelementptr inbounds float, ptr %x, i64 %kz
  %v = load float, ptr %px, align 4
  %acc.next = fadd float %acc, %v
  %i.next = add nuw nsw i32 %i, 1
  %c = icmp ult i32 %i.next, %n
  br i1 %c, label %loop, label %exit

exit:
  store float %acc.next, ptr %out, align 4
  ret void
}

define ptx_kernel void @cond(ptr noalias %x, ptr noalias %out, i32 %j, i32 %n) {
entry:
  %c1 = icmp slt i32 %j, 3
  %c2 = icmp sgt i32 %j, 56
  br label %loop

loop:
  %i = phi i32 [ 0, %entry ], [ %i.next, %loop ]
  %iz = zext i32 %i to i64
  %px = getelementptr inbounds float, ptr %x, i64 %iz
  %v = load float, ptr %px, align 4
  %t = select i1 %c2, float 0.0, float %v
  %r = select i1 %c1, float 0.0, float %t
  %po = getelementptr inbounds float, ptr %out, i64 %iz
  store float %r, ptr %po, align 4
  %i.next = add nuw nsw i32 %i, 1
  %c = icmp ult i32 %i.next, %n
  br i1 %c, label %loop, label %exit

exit:
  ret void
}

define ptx_kernel void @small(ptr noalias %out, i32 %a, i32 %b) {
entry:
  br label %loop

loop:
  %i = phi i32 [ 0, %entry ], [ %i.next, %loop ]
  %s1 = add i32 %i, %a
  %s2 = add i32 %s1, %b
  %p = getelementptr inbounds i32, ptr %out, i32 %i
  store i32 %s2, ptr %p, align 4
  %i.next = add nuw nsw i32 %i, 1
  %c = icmp ult i32 %i.next, 4
  br i1 %c, label %loop, label %exit

exit:
  ret void
}

; CHECK-LABEL: define ptx_kernel void @tree(
; CHECK: entry:
; CHECK-NEXT: [[AB:%.*]] = add i32 %a, %b
; CHECK: loop:
; CHECK: %s2 = add i32 [[AB]], %i
; CHECK-LABEL: define ptx_kernel void @addr(
; CHECK: entry:
; CHECK: [[AZ:%.*]] = zext i32 %a to i64
; CHECK-NEXT: [[BASE:%.*]] = getelementptr inbounds float, ptr %x, i64 [[AZ]]
; CHECK: loop:
; CHECK: [[IZ:%.*]] = zext i32 %i to i64
; CHECK-NEXT: %px = getelementptr inbounds float, ptr [[BASE]], i64 [[IZ]]
; CHECK-LABEL: define ptx_kernel void @cond(
; CHECK: entry:
; CHECK: [[C:%.*]] = select i1 %c1, i1 true, i1 %c2
; CHECK: loop:
; CHECK: %r = select i1 [[C]], float 0.000000e+00, float %v
; CHECK-LABEL: define ptx_kernel void @small(
; CHECK: loop:
; CHECK: %s1 = add i32 %i, %a
; CHECK-NEXT: %s2 = add i32 %s1, %b

; SMALL-LABEL: define ptx_kernel void @small(
; SMALL: entry:
; SMALL-NEXT: [[AB:%.*]] = add i32 %a, %b
; SMALL: %s2 = add i32 [[AB]], %i

; K2-LABEL: define ptx_kernel void @tree(
; K2: loop:
; K2: %s1 = add i32 %i, %a
; K2-NEXT: %s2 = add i32 %s1, %b

; LLVM-LABEL: define ptx_kernel void @addr(
; LLVM: loop:
; LLVM: %k = add nuw i32 %a, %i
; LLVM-LABEL: define ptx_kernel void @cond(
; LLVM: loop:
; LLVM: %t = select i1 %c2, float 0.000000e+00, float %v
; LLVM-NEXT: %r = select i1 %c1, float 0.000000e+00, float %t

; TRIPLE: error: licm: {{.*}} targets x86_64-unknown-linux-gnu
