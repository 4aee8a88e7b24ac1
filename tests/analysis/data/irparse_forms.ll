; Every instruction form the text reader of the IR view (sirius/analysis/irparse.py) reads,
; with the operand orders, constants and types where llvmlite reports something unexpected:
; tests/analysis/test_irparse.py compares the two views of this module.
target triple = "nvptx64-nvidia-cuda"

%struct.S = type { i32, float }
%struct.P = type <{ i8, i32 }>

@g = internal addrspace(1) global [4 x float] zeroinitializer, align 4
@"quoted name" = internal global i32 7
@s = internal addrspace(3) global %struct.S undef
@c = private unnamed_addr constant [3 x i8] c"ab\00"

declare i32 @vprintf(ptr, ptr)
declare float @llvm.fma.f32(float, float, float)
declare { i32, i1 } @llvm.sadd.with.overflow.i32(i32, i32)
declare void @varargs(i32, ...)

define internal float @"helper fn"(float %0, i32 %1) {
  %3 = fmul contract float %0, 2.000000e+00
  %4 = sitofp i32 %1 to float
  %5 = fadd float %3, %4
  ret float %5
}

define ptx_kernel void @k(ptr noalias noundef %p, i32 %n, i1 %c, <4 x i32> %v, half %h) {
  %1 = alloca i32, i32 4, align 4
  %2 = alloca %struct.S, align 8
  %a = getelementptr inbounds nuw float, ptr addrspace(1) @g, i64 2
  %b = load volatile float, ptr getelementptr (i8, ptr @"quoted name", i64 8), align 4
  %sel = select nnan i1 %c, float %b, float 0x3FB99999A0000000
  %neg = fneg fast float %sel
  %fr = freeze i32 %n
  %cmp = icmp samesign ult i32 %fr, -5
  %vc = icmp eq <4 x i32> %v, zeroinitializer
  %e = extractelement <4 x i32> %v, i64 1
  %ins = insertelement <4 x i32> %v, i32 %e, i32 0
  %sh = shufflevector <4 x i32> %ins, <4 x i32> poison, <2 x i32> <i32 0, i32 3>
  %hh = fadd half %h, 0xH3C00
  %bf = fadd bfloat 0xR3F80, 0xR4000
  %big = add i64 9223372036854775807, -9223372036854775808
  %t = add i1 true, false
  %fma = call range(i32 0, 10) float @llvm.fma.f32(float %neg, float 1.000000e+00, float %sel)
  %ov = call { i32, i1 } @llvm.sadd.with.overflow.i32(i32 %n, i32 1)
  %ov0 = extractvalue { i32, i1 } %ov, 0
  %sv = insertvalue %struct.S poison, i32 %ov0, 0
  %sf = extractvalue %struct.S %sv, 1
  %r = atomicrmw add ptr %p, i32 1 syncscope("block") monotonic, align 4
  %x = cmpxchg weak ptr %p, i32 %r, i32 0 seq_cst seq_cst, align 4
  %x0 = extractvalue { i32, i1 } %x, 0
  fence syncscope("block") acq_rel
  %as = call i32 asm sideeffect "mov.u32 $0, $1;", "=r,r"(i32 %x0)
  call void (i32, ...) @varargs(i32 %as, ptr @c, double 1.500000e+00, ptr null)
  %hf = call float @"helper fn"(float %sf, i32 %n)
  %pr = call i32 @vprintf(ptr @c, ptr %2)
  %cast = addrspacecast ptr addrspace(3) @s to ptr
  store volatile float %hf, ptr %cast, align 4
  switch i32 %n, label %def [
    i32 0, label %zero
    i32 -1, label %one
  ]

zero:
  br i1 %cmp, label %one, label %def

one:
  %ph = phi float [ %fma, %zero ], [ 1.000000e+00, %0 ]
  br label %def

def:
  %ph2 = phi i32 [ 0, %0 ], [ 1, %zero ], [ %n, %one ]
  ret void
}

define void @unreach() {
entry:
  unreachable
}

define void @atomics(ptr %p) {
  %v = load atomic i32, ptr %p syncscope("device") acquire, align 4
  store atomic volatile i32 %v, ptr %p release, align 4
  ret void
}
