// sirius_rt.c -- the C half of sirius's CPU executor.
//
// Device code (NVPTX LLVM IR rewritten for the host by sirius/runtime/cpu/rewrite.py) is
// JIT-compiled once per worker, so every worker has its own copy of the module's globals: the
// per-thread context `__sirius_ctx` (thread/block ids, counters) and the block's shared memory.
// This file schedules a launch over those workers:
//   * kernels without barriers or warp operations run each thread of a block to completion, one
//     after the other, in the requested order (the fast path);
//   * kernels whose only cooperation is plain __syncthreads in the kernel body run as work-item
//     loops (rewrite.py and wiloop.py split them at every barrier into a continuation that
//     returns at a barrier and resumes after it, its values live across barriers in a per-thread
//     frame): each round calls every runnable thread of the block once, in the requested order,
//     and a barrier is released as on the fiber path (same rounds, same orders, same faults);
//   * other kernels run every thread of a block as a fiber (own stack); a barrier or a warp
//     operation switches back to the block's scheduler, which releases a barrier once every
//     thread of the block waits on it and completes a warp operation once every live lane of
//     the warp asks for it.  A barrier that cannot complete is reported, never waited on.
// It also provides the bounds checker, the access tracer and the libdevice (__nv_*) functions.
//
// Faults. While a launch runs, SIGSEGV, SIGBUS, SIGFPE and SIGILL raised by a worker (device
// code, or the runtime on its behalf) are caught: the handler records the fault and the worker
// siglongjmps back to its loop (each worker has its own alternate signal stack, so a stack
// overflow is caught too); the launch stops and Python reports it. The first SIGINT during a
// launch sets its `cancel` flag (workers stop between blocks) and goes on to the handler that
// was installed before (Python's, which raises KeyboardInterrupt); a second one during the same
// launch ends the process with status 130 (a kernel that never finishes its block).
//
// Built by sirius/runtime/cpu/rtlib.py with clang (-O2 -shared -fPIC); loaded with ctypes and
// with llvmlite's load_library_permanently so the JIT resolves its symbols.

#define _GNU_SOURCE
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

// ---- context switches -------------------------------------------------------------------------
// On x86-64 a fiber switch saves the callee-saved registers and the FP control words on the
// stack and swaps stack pointers (glibc's swapcontext also makes a sigprocmask system call on
// every switch, which made barrier-heavy kernels several times slower). Elsewhere: ucontext.
#if defined(__x86_64__)
typedef struct { void *sp; } fctx;
__attribute__((naked, noinline)) static void fctx_switch(fctx *from, fctx *to) {
    __asm__ volatile(
        "pushq %rbp\n\tpushq %rbx\n\tpushq %r12\n\tpushq %r13\n\tpushq %r14\n\tpushq %r15\n\t"
        "subq $8, %rsp\n\tstmxcsr (%rsp)\n\tfnstcw 4(%rsp)\n\t"
        "movq %rsp, (%rdi)\n\tmovq (%rsi), %rsp\n\t"
        "ldmxcsr (%rsp)\n\tfldcw 4(%rsp)\n\taddq $8, %rsp\n\t"
        "popq %r15\n\tpopq %r14\n\tpopq %r13\n\tpopq %r12\n\tpopq %rbx\n\tpopq %rbp\n\t"
        "ret\n\t");
}
// A fresh fiber: its first switch-in "returns" into entry with an ABI-aligned stack.
static void fctx_make(fctx *c, char *stack, size_t size, void (*entry)(void)) {
    uint64_t *top = (uint64_t *)(((uintptr_t)(stack + size)) & ~(uintptr_t)15);
    // The switch reads 7 words (control words, 6 registers) and `ret` pops the 8th, so rsp
    // after the `ret` is sp + 8 words = top - 3 words: 8 mod 16, as just after a call.
    uint64_t *sp = top - 11;
    uint32_t csr[2];
    __asm__ volatile("stmxcsr %0\n\tfnstcw %1" : "=m"(csr[0]), "=m"(csr[1]));
    memcpy(&sp[0], csr, 8);
    for (int i = 1; i <= 6; ++i) sp[i] = 0;
    sp[7] = (uint64_t)entry;
    sp[8] = sp[9] = sp[10] = 0;
    c->sp = sp;
}
#else
typedef struct { ucontext_t uc; } fctx;
static void fctx_switch(fctx *from, fctx *to) { swapcontext(&from->uc, &to->uc); }
static void fctx_make(fctx *c, char *stack, size_t size, void (*entry)(void)) {
    getcontext(&c->uc);
    c->uc.uc_stack.ss_sp = stack;
    c->uc.uc_stack.ss_size = size;
    c->uc.uc_link = NULL;
    makecontext(&c->uc, entry, 0);
}
#endif

// ---- the per-worker context seen by JIT code (offsets mirrored in rewrite.py) ---------------
typedef struct worker worker;
typedef struct {
    uint32_t tid[3], ntid[3], ctaid[3], nctaid[3]; // 0..47
    uint64_t icount, gld, gst, sld, sst;           // 48, 56, 64, 72, 80
    worker *w;                                      // 88
    char *smem;                                     // 96
    uint64_t smem_size;                             // 104
    uint64_t *site_range;                           // 112: [lo, hi) per access site
    uint64_t flops[3];                              // 120: f16, f32, f64 FLOPs (count_flops)
} sirius_ctx;

_Static_assert(__builtin_offsetof(sirius_ctx, icount) == 48, "ctx layout");
_Static_assert(__builtin_offsetof(sirius_ctx, w) == 88, "ctx layout");
_Static_assert(__builtin_offsetof(sirius_ctx, smem_size) == 104, "ctx layout");
_Static_assert(__builtin_offsetof(sirius_ctx, site_range) == 112, "ctx layout");
_Static_assert(__builtin_offsetof(sirius_ctx, flops) == 120, "ctx layout");
_Static_assert(sizeof(sirius_ctx) <= 192, "ctx layout: CTX_BYTES in native.py");

typedef void (*thread_fn)(void **args);
// a work-item-loop kernel runs a thread from a state (0: the start, s + 1: after the stop at
// site s) to its next barrier (s + 1), its next warp operation ((s + 1) | WARP_STOP, its record
// written) or its end (0). What the runtime calls for such a kernel (block_wrapper in
// entries.py): one round over the threads list[0, count), in that order; each thread i runs
// from res[i] (a warp stop's bit cleared) in its frame, with its ids from tids[3 i], and res[i]
// becomes where it stopped. Returns 1 when every thread stopped in the same place. `uniform`:
// -1, or the state every thread of the list resumes from (then res[i] is not read; the block
// loop has a copy for each state where its dispatch is folded away). `chain`: the list is one
// full warp, in the order it has at every step; when all its lanes stop at one warp operation
// with constant operands (a shuffle, activemask, syncwarp), the block loop completes it as
// complete_warp would and runs them on, returning only where they stop otherwise.
// With `lanes` (the random order's lane orders) it draws the lanes' next order at each such
// step with sirius_rt_warp_order, as run_warps does.
typedef uint32_t (*block_fn)(void **args, char *frames, uint64_t frame_bytes,
                             uint32_t *list, uint32_t count, const uint32_t *tids,
                             uint32_t *res, int32_t uniform, int32_t chain, void *lanes);
#define ANY_STATE (-1)

enum { ORDER_FORWARD = 0, ORDER_REVERSE = 1, ORDER_RANDOM = 2 };
enum { MODE_FAST = 0, MODE_FIBERS = 1, MODE_LOOPS = 2 };
enum { RUN = 0, AT_BARRIER = 1, AT_WARP = 2, EXITED = 3 };
// MODE_LOOPS: a continuation that stops at a warp operation returns its site + 1 with this bit
#define WARP_STOP 0x80000000u
enum { FAULT_NONE = 0, FAULT_BOUNDS = 1, FAULT_BARRIER = 2, FAULT_WARP = 3, FAULT_SIGNAL = 4 };
enum { W_SHFL_IDX = 0, W_SHFL_UP = 1, W_SHFL_DOWN = 2, W_SHFL_BFLY = 3, W_BALLOT = 4,
       W_ANY = 5, W_ALL = 6, W_UNI = 7, W_SYNC = 8, W_MATCH_ANY = 9,
       W_ACTIVEMASK = 10 };

// A launch as Python describes it (ctypes mirror in sirius/runtime/cpu/native.py).
typedef struct {
    int32_t nworkers;
    int32_t use_fibers;     // MODE_FAST, MODE_FIBERS or MODE_LOOPS
    sirius_ctx **ctx;       // per worker
    thread_fn *fn;          // per worker
    void **args;
    uint32_t grid[3], block[3];
    int32_t order;
    uint64_t seed;
    int32_t check_bounds;
    int32_t trace;
    int32_t nallocs;
    uint64_t *alloc_lo, *alloc_hi; // sorted
    uint64_t stack_bytes;
    // results
    uint64_t counters[6];    // instructions, global ld, global st, shared ld, shared st, barriers
    int32_t fault;
    uint32_t fault_block[3], fault_thread[3];
    uint64_t fault_addr;
    uint32_t fault_size, fault_kind, fault_site, fault_waiting, fault_exited;
    // trace results: per worker arrays of records
    void **trace_ptr;
    uint64_t *trace_len;
    // set by anyone (the SIGINT handler, Python) to stop the launch between blocks
    volatile int32_t cancel;
    int32_t fault_signal;   // FAULT_SIGNAL: the signal; fault_addr its address, fault_kind 1 if
    int32_t fault_stack;    // a write; fault_stack 1 when the address is at a stack's end
    // red zones to check after an unchecked launch: the bytes [lo - 256, lo) and [hi, hi + 256)
    // of every allocation must still hold 0xCD; rz_dirty[i] = 1 where they do not
    int32_t nredzones;
    uint64_t *rz_lo, *rz_hi;
    uint8_t *rz_dirty;
    int32_t rz_found;       // how many are
    // progress (or NULL): blocks worker i has finished, at done[8 * i] (a cache line each);
    // Python reads them while the launch runs
    volatile uint64_t *done;
    uint64_t frame_bytes;   // MODE_LOOPS: the per-thread frame (a multiple of 64)
    // or NULL: run only these blocks (linear ids), in this order (a `counters` megakernel's
    // segment, some of its blocks at a time)
    const uint32_t *block_list;
    uint64_t nblock_list;
    uint64_t flops[3];      // results: f16, f32, f64 FLOPs (modules rewritten with count_flops)
} launch_desc;

typedef struct {
    uint32_t block, thread; // linear ids
    uint64_t addr;
    uint32_t size;
    uint32_t kind;
} trace_rec;

// A thread's warp operation: where it waits and, once the warp completes it, its result. On
// fibers it is part of the fiber; with work-item loops it is the first 32 bytes of the thread's
// frame, which the continuation writes (op, mask, val, b, c) and reads (result) itself
// (WARP_RECORD in wiloop.py), so that a warp operation costs no call into the runtime.
typedef struct {
    int32_t op;
    uint32_t mask, val, b, c;
    int32_t site;
    uint32_t result, pad;
} wrec;
_Static_assert(sizeof(wrec) == 32, "wrec layout: WARP_RECORD in wiloop.py");

typedef struct {
    fctx uc;
    uint32_t tid[3];
    int state;
    int bar_id, bar_count, bar_site, bar_red, bar_pred;
    wrec wr;          // fibers: the warp operation
} fiber;

// The lanes' order at each step of run_warps in the random order: one of LANE_PERMS random
// permutations of 32 lanes, drawn when a launch first needs one (from a stream of their own,
// so that a kernel without warp operations draws what it drew before), picked at random per
// step. A full Fisher-Yates draw per step cost as much as the lanes' work between shuffles.
#define LANE_PERMS 64
typedef struct {
    uint64_t rng, bits;
    int nbits, ready;
    uint8_t perm[LANE_PERMS][32];
} lane_orders;

// The threads' order of each round of a block in the random order: one of THREAD_PERMS random
// permutations of the block's threads, drawn when a launch first needs one (from the worker's
// stream), picked at random per round. A Fisher-Yates draw of 256 threads per round cost 13%
// of a random-order launch of TVM's grouped convolution (a block: four rounds, 41 IR
// instructions per thread).
#define THREAD_PERMS 64
typedef struct {
    uint32_t *perm;  // THREAD_PERMS permutations of the block's threads
    uint64_t bits;
    int nbits, ready;
} thread_orders;

struct worker {
    launch_desc *d;
    sirius_ctx *ctx;
    thread_fn fn;
    int index;
    // fibers
    int nthreads;
    fiber *fibers;
    char *stacks;
    size_t stack_bytes, stacks_cap;
    char *frames;     // MODE_LOOPS: nthreads frames of d->frame_bytes
    size_t frames_cap;
    fctx sched;
    int cur;          // fiber running, -1 outside fiber mode
    // the warp operation record of thread i is at recs + i * rec_stride (the fiber's `wr`, or
    // the start of the thread's frame in MODE_LOOPS)
    char *recs;
    size_t rec_stride;
    // MODE_LOOPS, per warp of the block (at most 32): lanes not exited; lanes that stopped at
    // a warp operation in this round, the site of the first, and whether the sites differ
    uint32_t wlive[32], warr[32];
    int32_t wsite[32];
    uint8_t wmixed[32];
    jmp_buf jb;       // fast path fault exit
    sigjmp_buf sig_jb;  // where a caught signal returns to (worker_main)
    volatile sig_atomic_t armed;  // 1 while a signal in this thread is a fault of the launch
    char *altstack;   // this worker's alternate signal stack
    int faulted;
    uint64_t barriers;
    uint32_t block_linear;
    uint32_t *perm;
    thread_orders threads;  // the random order's thread orders of a block's rounds
    uint32_t *seq;    // MODE_LOOPS: the block's threads in forward or reverse order
    uint32_t *sel;    // MODE_LOOPS: the threads that run in a round
    uint32_t *res;    // MODE_LOOPS: where each thread stopped (block_fn's res)
    uint32_t *tids;   // the thread ids (x, y, z) of each linear thread id of the block
    uint64_t rng;
    lane_orders lanes;  // the random order's lane orders in run_warps
    trace_rec *trace;
    uint64_t trace_len, trace_cap;
};

static __thread worker *tls_worker;

static inline wrec *rec_of(worker *w, int i) {
    return (wrec *)(w->recs + (size_t)i * w->rec_stride);
}

static uint64_t splitmix(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static void make_order(uint32_t *perm, uint32_t n, int order, uint64_t *rng) {
    for (uint32_t i = 0; i < n; ++i) perm[i] = order == ORDER_REVERSE ? n - 1 - i : i;
    if (order != ORDER_RANDOM) return;
    // Fisher-Yates; each draw is 32 bits of a splitmix output scaled to [0, i) by a multiply
    // (Lemire's method: no division; the bias, below i / 2^32, does not matter here)
    uint64_t bits = 0;
    for (uint32_t i = n, half = 0; i > 1; --i, half ^= 1) {
        if (!half) bits = splitmix(rng);
        uint32_t j = (uint32_t)(((bits & 0xffffffffu) * (uint64_t)i) >> 32);
        bits >>= 32;
        uint32_t t = perm[i - 1]; perm[i - 1] = perm[j]; perm[j] = t;
    }
}

static const uint8_t *lane_order(lane_orders *o) {
    if (!o->ready) {
        uint32_t p[32];
        for (int k = 0; k < LANE_PERMS; ++k) {
            make_order(p, 32, ORDER_RANDOM, &o->rng);
            for (int l = 0; l < 32; ++l) o->perm[k][l] = (uint8_t)p[l];
        }
        o->ready = 1;
    }
    if (o->nbits < 6) {
        o->bits = splitmix(&o->rng);
        o->nbits = 64;
    }
    const uint8_t *p = o->perm[o->bits & (LANE_PERMS - 1)];
    o->bits >>= 6;
    o->nbits -= 6;
    return p;
}

// The block loop's chained warp steps (block_fn) in the random order: list, one full warp of
// the block, in its next random order (run_warps' draw).
static void random_lanes(lane_orders *o, uint32_t warp0, uint32_t *list) {
    const uint8_t *p = lane_order(o);
    for (int l = 0; l < 32; ++l) list[l] = warp0 + p[l];
}

void sirius_rt_warp_order(void *lanes, uint32_t *list) {
    random_lanes((lane_orders *)lanes, list[0] & ~31u, list);
}

// The order of the block's threads in its next round: forward or reverse (w->seq's), or
// one of the launch's random thread orders. The fibers and the block loops draw their rounds'
// orders alike, so that both run the same schedule.
static const uint32_t *thread_order(worker *w) {
    uint32_t n = (uint32_t)w->nthreads;
    if (w->d->order != ORDER_RANDOM) {
        make_order(w->perm, n, w->d->order, NULL);
        return w->perm;
    }
    thread_orders *o = &w->threads;
    if (!o->ready) {
        for (uint32_t k = 0; k < THREAD_PERMS; ++k)
            make_order(o->perm + (size_t)k * n, n, ORDER_RANDOM, &w->rng);
        o->ready = 1;
    }
    if (o->nbits < 6) {
        o->bits = splitmix(&w->rng);
        o->nbits = 64;
    }
    const uint32_t *p = o->perm + (size_t)(o->bits & (THREAD_PERMS - 1)) * n;
    o->bits >>= 6;
    o->nbits -= 6;
    return p;
}

// A round's draw whose order nothing reads (the fiber scheduler's round where no thread
// runs), kept so that the orders stay the fiber scheduler's.
static void skip_order(worker *w) {
    if (w->d->order == ORDER_RANDOM) (void)thread_order(w);
}

// The thread ids of the block's linear thread ids, once per launch (three divisions per thread
// and block cost as much as a short thread's body).
static void make_tids(uint32_t *tids, const uint32_t *block, uint32_t n) {
    uint32_t x = 0, y = 0, z = 0;
    for (uint32_t i = 0; i < n; ++i) {
        tids[3 * i] = x; tids[3 * i + 1] = y; tids[3 * i + 2] = z;
        if (++x == block[0]) { x = 0; if (++y == block[1]) { y = 0; ++z; } }
    }
}

static void set_ids(worker *w, uint32_t linear) {
    memcpy(w->ctx->tid, w->tids + 3 * (size_t)linear, 3 * sizeof(uint32_t));
}

// ---- faults ---------------------------------------------------------------------------------
// 1 when this is the launch's first fault (the one reported); later ones are dropped.
static int record_fault(worker *w, int kind) {
    launch_desc *d = w->d;
    int32_t none = FAULT_NONE;
    if (!__atomic_compare_exchange_n(&d->fault, &none, kind, 0, __ATOMIC_SEQ_CST,
                                     __ATOMIC_SEQ_CST))
        return 0;
    memcpy(d->fault_block, w->ctx->ctaid, sizeof d->fault_block);
    memcpy(d->fault_thread, w->ctx->tid, sizeof d->fault_thread);
    return 1;
}

static _Noreturn void leave_block(worker *w) {
    w->faulted = 1;
    if (w->cur >= 0) {
        fctx_switch(&w->fibers[w->cur].uc, &w->sched);  // never resumed
        abort();
    }
    longjmp(w->jb, 1);
}

// ---- bounds checks and traces (called from instrumented JIT code) ----------------------------
// The allocation holding [a, a + size), or -1.
static int in_allocation(launch_desc *d, uint64_t a, uint64_t size) {
    int lo = 0, hi = d->nallocs - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (a < d->alloc_lo[mid]) hi = mid - 1;
        else if (a >= d->alloc_hi[mid]) lo = mid + 1;
        else return a + size <= d->alloc_hi[mid] ? mid : -1;
    }
    return -1;
}

static int on_stack(worker *w, uint64_t a) {
    if (w->cur >= 0) {
        uint64_t lo = (uint64_t)(w->stacks + (size_t)w->cur * w->stack_bytes);
        return a >= lo && a < lo + w->stack_bytes;
    }
    if (w->d->use_fibers == MODE_LOOPS &&
        a - (uint64_t)w->frames < (uint64_t)w->nthreads * w->d->frame_bytes)
        return 1;  // a kernel's local arrays live in its thread's frame
    char here;
    uint64_t sp = (uint64_t)&here;
    return a >= sp - (1u << 20) && a < sp + (8u << 20);
}

void sirius_rt_access(sirius_ctx *c, void *p, uint32_t size, uint32_t kind, uint32_t site) {
    worker *w = c->w;
    launch_desc *d = w->d;
    uint64_t a = (uint64_t)p;
    if (d->check_bounds) {
        // A site's range: the shared memory or the allocation its last access was in. The
        // rewritten code checks an access against it inline and calls this only when it is
        // outside (the device clears the ranges at each launch; never filled when tracing,
        // which must see every access).
        uint64_t *range = (!d->trace && c->site_range) ? c->site_range + 2 * (uint64_t)site : NULL;
        int ok = 0, k;
        if (a - (uint64_t)c->smem < c->smem_size && a + size <= (uint64_t)c->smem + c->smem_size) {
            ok = 1;
            if (range) { range[0] = (uint64_t)c->smem; range[1] = (uint64_t)c->smem + c->smem_size; }
        } else if ((k = in_allocation(d, a, size)) >= 0) {
            ok = 1;
            if (range) { range[0] = d->alloc_lo[k]; range[1] = d->alloc_hi[k]; }
        } else {
            ok = on_stack(w, a);
        }
        if (!ok) {
            if (record_fault(w, FAULT_BOUNDS)) {
                d->fault_addr = a;
                d->fault_size = size;
                d->fault_kind = kind;
                d->fault_site = site;
            }
            leave_block(w);
        }
    }
    if (d->trace && !on_stack(w, a)) {
        if (w->trace_len == w->trace_cap) {
            w->trace_cap = w->trace_cap ? 2 * w->trace_cap : 4096;
            w->trace = realloc(w->trace, w->trace_cap * sizeof(trace_rec));
            if (!w->trace) { fprintf(stderr, "sirius: out of memory for the trace\n"); abort(); }
        }
        uint32_t lin = c->tid[0] + c->ntid[0] * (c->tid[1] + c->ntid[1] * c->tid[2]);
        w->trace[w->trace_len++] = (trace_rec){w->block_linear, lin, a, size, kind};
    }
}

// ---- fibers -----------------------------------------------------------------------------------
static void fiber_main(void) {
    worker *w = tls_worker;
    w->fn(w->d->args);
    w->fibers[w->cur].state = EXITED;
    fctx_switch(&w->fibers[w->cur].uc, &w->sched);
}

static void yield_to_scheduler(worker *w) {
    fiber *f = &w->fibers[w->cur];
    fctx_switch(&f->uc, &w->sched);
    if (w->faulted) leave_block(w);
}

// A barrier; red: 0 plain, 1 popc, 2 and, 3 or (__syncthreads_count/and/or), over pred.
uint32_t sirius_rt_barrier(sirius_ctx *c, int32_t id, int32_t count, int32_t site, int32_t red,
                           int32_t pred) {
    worker *w = c->w;
    if (w->cur < 0) { // a barrier in a kernel that was classified barrier-free: a sirius bug
        fprintf(stderr, "sirius: barrier outside fiber mode\n");
        abort();
    }
    fiber *f = &w->fibers[w->cur];
    f->state = AT_BARRIER;
    f->bar_id = id;
    f->bar_count = count;
    f->bar_site = site;
    f->bar_red = red;
    f->bar_pred = pred != 0;
    yield_to_scheduler(w);
    return f->wr.result;
}

// A warp-synchronous operation at call site `site`: the lanes that wait at the same site form
// one operation (lanes in divergent branches wait at different sites).
uint32_t sirius_rt_warp(sirius_ctx *c, int32_t op, uint32_t mask, uint32_t val, uint32_t b,
                        uint32_t cc, int32_t site) {
    worker *w = c->w;
    if (w->cur < 0) { fprintf(stderr, "sirius: warp op outside fiber mode\n"); abort(); }
    fiber *f = &w->fibers[w->cur];
    f->state = AT_WARP;
    f->wr.op = op; f->wr.mask = mask; f->wr.val = val; f->wr.b = b; f->wr.c = cc;
    f->wr.site = site;
    yield_to_scheduler(w);
    return f->wr.result;
}

// The lane whose value lane `lane` of a shuffle reads (its own when the source is out of
// range), as PTX defines shfl.sync's clamp and segment mask operand `c` (c & 31: the clamp,
// c >> 8 & 31: the segment mask).
static inline uint32_t shfl_source(int op, uint32_t lane, uint32_t b, uint32_t c) {
    uint32_t seg = (c >> 8) & 31, clamp = c & 31;
    uint32_t maxl = (lane & seg) | (clamp & ~seg), minl = lane & seg;
    int32_t j = 0;
    int ok = 0;
    switch (op) {
    case W_SHFL_UP: j = (int32_t)lane - (int32_t)b; ok = j >= (int32_t)maxl; break;
    case W_SHFL_DOWN: j = (int32_t)(lane + b); ok = j <= (int32_t)maxl; break;
    case W_SHFL_BFLY: j = (int32_t)(lane ^ b); ok = j <= (int32_t)maxl; break;
    default: j = (int32_t)(minl | (b & 31 & ~seg)); ok = j <= (int32_t)maxl; break;
    }
    return !ok || j < 0 || j > 31 ? lane : (uint32_t)j;
}

// A full warp whose 32 lanes do one shuffle (the same operands b and c) or activemask: TVM's
// reductions. 1 when done; 0 for any other case.
// A full warp's operation op (b, c) with every lane at it: a shuffle, activemask or syncwarp
// (records at base, stride apart).
static void exchange_full_warp(char *base, size_t stride, int32_t op, uint32_t b, uint32_t c) {
    if (op == W_ACTIVEMASK || op == W_SYNC) {
        uint32_t r = op == W_ACTIVEMASK ? 0xffffffffu : 0;
        for (int l = 0; l < 32; ++l) ((wrec *)(base + (size_t)l * stride))->result = r;
        return;
    }
    uint32_t src[32], val[32];
    for (int l = 0; l < 32; ++l) val[l] = ((const wrec *)(base + (size_t)l * stride))->val;
    if (op == W_SHFL_DOWN && (c >> 8 & 31) == 0)
        for (uint32_t l = 0; l < 32; ++l) src[l] = l + b <= (c & 31) ? l + b : l;
    else if (op == W_SHFL_BFLY && (c >> 8 & 31) == 0)
        for (uint32_t l = 0; l < 32; ++l) src[l] = (l ^ b) <= (c & 31) ? l ^ b : l;
    else
        for (uint32_t l = 0; l < 32; ++l) src[l] = shfl_source(op, l, b, c);
    for (int l = 0; l < 32; ++l) ((wrec *)(base + (size_t)l * stride))->result = val[src[l]];
}

static int complete_full_warp(worker *w, int warp0) {
    char *base = w->recs + (size_t)warp0 * w->rec_stride;
    size_t stride = w->rec_stride;
    const wrec *r0 = (const wrec *)base;
    int32_t op = r0->op;
    uint32_t b = r0->b, c = r0->c;
    if (op > W_SHFL_BFLY && op != W_ACTIVEMASK) return 0;
    int same = 1;
    for (int l = 0; l < 32; ++l) {
        const wrec *f = (const wrec *)(base + (size_t)l * stride);
        same &= (f->op == op) & (f->b == b) & (f->c == c);
    }
    if (!same) return 0;
    exchange_full_warp(base, stride, op, b, c);
    return 1;
}

// The block loop's chained warp steps (block_fn): the operation (op, b, c constant) every lane
// of the full warp holding thread `thread` waits at, completed as complete_warp would (a
// shuffle, activemask, syncwarp; the block loop calls this for no other).
void sirius_rt_warp_exchange(char *frames, uint64_t fb, uint32_t thread, int32_t op,
                             uint32_t b, uint32_t c) {
    exchange_full_warp(frames + (size_t)(thread & ~31u) * fb, fb, op, b, c);
}

// Every other case, lane by lane (the fiber scheduler's semantics of each operation).
static void complete_lanes(worker *w, int warp0, uint32_t present) {
    uint32_t val[32];
    for (uint32_t m = present; m; m &= m - 1)
        val[__builtin_ctz(m)] = rec_of(w, warp0 + __builtin_ctz(m))->val;
    for (uint32_t m = present; m; m &= m - 1) {
        int l = __builtin_ctz(m);
        wrec *f = rec_of(w, warp0 + l);
        uint32_t r = 0, lane = (uint32_t)l;
        if (f->op <= W_SHFL_BFLY) {
            uint32_t j = shfl_source(f->op, lane, f->b, f->c);
            r = present >> j & 1 ? val[j] : val[lane];
        } else if (f->op == W_BALLOT || f->op == W_ANY || f->op == W_ALL || f->op == W_UNI) {
            uint32_t bal = 0, mm = f->mask & present;
            for (int k = 0; k < 32; ++k)
                if ((mm >> k & 1) && val[k]) bal |= 1u << k;
            if (f->op == W_BALLOT) r = bal;
            else if (f->op == W_ANY) r = bal != 0;
            else if (f->op == W_ALL) r = bal == mm;
            else r = bal == 0 || bal == mm;
        } else if (f->op == W_ACTIVEMASK) {
            r = present;
        } else if (f->op == W_MATCH_ANY) {
            for (int k = 0; k < 32; ++k)
                if ((f->mask & present) >> k & 1 && val[k] == f->val) r |= 1u << k;
        }
        f->result = r;
    }
}

// The warp operation of the lanes `present` of the warp at warp0. `set_run`: mark the lanes
// runnable (not in run_block_loops' all-runnable mode, where the fibers' states are not kept)
static void complete_warp(worker *w, int warp0, uint32_t present, int set_run) {
    if (!(present == 0xffffffffu && complete_full_warp(w, warp0)))
        complete_lanes(w, warp0, present);
    if (set_run)
        for (uint32_t m = present; m; m &= m - 1)
            w->fibers[warp0 + __builtin_ctz(m)].state = RUN;
}

// Try to complete one warp operation or barrier; 1 when something became runnable.
static int release(worker *w) {
    int n = w->nthreads;
    // warp operations: the lanes of a warp waiting at one call site complete together once
    // every live lane their masks name is among them. activemask completes with the lanes at
    // its site (this runs only when no thread can run, so every lane that will get there has).
    for (int warp0 = 0; warp0 < n; warp0 += 32) {
        fiber *F = w->fibers + warp0;
        int lanes = n - warp0 < 32 ? n - warp0 : 32;
        uint32_t live = 0, done_sites = 0;
        for (int l = 0; l < lanes; ++l)
            if (F[l].state != EXITED) live |= 1u << l;
        for (int l = 0; l < lanes; ++l) {
            if (F[l].state != AT_WARP || (done_sites >> l & 1)) continue;
            wrec *rl = rec_of(w, warp0 + l);
            uint32_t group = 0, need = 0;
            for (int k = l; k < lanes; ++k)
                if (F[k].state == AT_WARP && rec_of(w, warp0 + k)->site == rl->site) {
                    group |= 1u << k;
                    need |= rec_of(w, warp0 + k)->mask;
                }
            done_sites |= group;
            if (rl->op == W_ACTIVEMASK || ((need & live) & ~group) == 0) {
                complete_warp(w, warp0, group, 1);
                return 1;
            }
        }
    }
    // barriers: every barrier id that has waiters, in order of the first waiter
    int exited = 0;
    for (int i = 0; i < n; ++i) exited += w->fibers[i].state == EXITED;
    for (int first = 0; first < n; ++first) {
        fiber *f0 = &w->fibers[first];
        if (f0->state != AT_BARRIER) continue;
        int id = f0->bar_id, count = f0->bar_count, by_id = 0, seen = 0;
        for (int i = 0; i < first; ++i)
            seen |= w->fibers[i].state == AT_BARRIER && w->fibers[i].bar_id == id;
        if (seen) continue;
        for (int i = first; i < n; ++i)
            by_id += w->fibers[i].state == AT_BARRIER && w->fibers[i].bar_id == id;
        int target = count > 0 ? count : n;
        if (by_id < target || (count == 0 && exited > 0)) continue;
        int released = 0, popc = 0;
        for (int i = first; i < n && released < target; ++i)
            if (w->fibers[i].state == AT_BARRIER && w->fibers[i].bar_id == id) {
                popc += w->fibers[i].bar_pred;
                ++released;
            }
        released = 0;
        for (int i = first; i < n && released < target; ++i)
            if (w->fibers[i].state == AT_BARRIER && w->fibers[i].bar_id == id) {
                fiber *f = &w->fibers[i];
                f->wr.result = f->bar_red == 1 ? (uint32_t)popc
                           : f->bar_red == 2 ? popc == target
                           : f->bar_red == 3 ? popc > 0 : 0;
                f->state = RUN;
                ++released;
            }
        ++w->barriers;
        return 1;
    }
    return 0;
}

// MODE_LOOPS: complete, at once, the warp operation of every warp whose live lanes all wait at
// one site (the common, converged case). Any schedule of the fiber scheduler completes each of
// them with the same lanes (no other lane can join it, none can leave), and warps share nothing
// a warp operation reads; the other cases go through release(), one operation at a time.
static int release_converged_warps(worker *w) {
    int n = w->nthreads, done = 0;
    for (int warp0 = 0; warp0 < n; warp0 += 32) {
        fiber *F = w->fibers + warp0;
        int lanes = n - warp0 < 32 ? n - warp0 : 32, site = -1, ok = 1;
        uint32_t group = 0;
        for (int l = 0; l < lanes && ok; ++l) {
            if (F[l].state == EXITED) continue;
            if (F[l].state != AT_WARP || (site >= 0 && rec_of(w, warp0 + l)->site != site)) ok = 0;
            site = rec_of(w, warp0 + l)->site;
            group |= 1u << l;
        }
        if (ok && group) {
            complete_warp(w, warp0, group, 1);
            ++done;
        }
    }
    return done;
}

static void report_stuck(worker *w) {
    launch_desc *d = w->d;
    int waiting = 0, exited = 0, site = 0, at_warp = 0;
    for (int i = 0; i < w->nthreads; ++i) {
        fiber *f = &w->fibers[i];
        if (f->state == AT_BARRIER) { if (!waiting) site = f->bar_site; ++waiting; }
        if (f->state == AT_WARP) ++at_warp;
        if (f->state == EXITED) ++exited;
    }
    if (!record_fault(w, waiting ? FAULT_BARRIER : FAULT_WARP)) return;
    d->fault_site = (uint32_t)site;
    d->fault_waiting = (uint32_t)(waiting ? waiting : at_warp);
    d->fault_exited = (uint32_t)exited;
    // the thread reported is the first that is not waiting where the others wait
    for (int i = 0; i < w->nthreads; ++i)
        if (w->fibers[i].state != (waiting ? AT_BARRIER : AT_WARP)) {
            memcpy(d->fault_thread, w->fibers[i].tid, sizeof d->fault_thread);
            break;
        }
}

static int ensure_stacks(worker *w, int n) {
    size_t need = (size_t)n * w->stack_bytes;
    if (w->stacks && w->stacks_cap >= need) return 1;
    if (w->stacks) munmap(w->stacks, w->stacks_cap);
    w->stacks = mmap(NULL, need, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (w->stacks == MAP_FAILED) { w->stacks = NULL; return 0; }
    for (int i = 0; i < n; ++i) // a guard page at the low end of every stack
        mprotect(w->stacks + (size_t)i * w->stack_bytes, 4096, PROT_NONE);
    w->stacks_cap = need;
    return 1;
}

static void run_block_fibers(worker *w) {
    launch_desc *d = w->d;
    int n = w->nthreads;
    w->recs = (char *)&w->fibers[0].wr;
    w->rec_stride = sizeof(fiber);
    for (int i = 0; i < n; ++i) {
        fiber *f = &w->fibers[i];
        set_ids(w, (uint32_t)i);
        memcpy(f->tid, w->ctx->tid, sizeof f->tid);
        f->state = RUN;
        fctx_make(&f->uc, w->stacks + (size_t)i * w->stack_bytes, w->stack_bytes, fiber_main);
    }
    for (;;) {
        int ran = 0;
        const uint32_t *order = thread_order(w);
        for (int k = 0; k < n; ++k) {
            int i = (int)order[k];
            fiber *f = &w->fibers[i];
            if (f->state != RUN) continue;
            memcpy(w->ctx->tid, f->tid, sizeof f->tid);
            w->cur = i;
            fctx_switch(&w->sched, &f->uc);
            w->cur = -1;
            ran = 1;
            if (w->faulted) return;
        }
        if (ran) continue;
        int live = 0;
        for (int i = 0; i < n; ++i) live += w->fibers[i].state != EXITED;
        if (!live) return;
        if (!release(w)) {
            report_stuck(w);
            w->faulted = 1;
            return;
        }
    }
}

// MODE_LOOPS: the fibers' thread ids from the block's table (kept there only while every
// thread is runnable; report_stuck reads the fibers')
static void fiber_ids(worker *w) {
    for (int i = 0; i < w->nthreads; ++i)
        memcpy(w->fibers[i].tid, w->tids + 3 * (size_t)i, sizeof w->fibers[i].tid);
}

// MODE_LOOPS: thread i's state from where its continuation stopped (r: block_fn's res): exited, at
// a warp operation (its record's site set, the warp's arrivals noted), or at a barrier.
static void settle(worker *w, int i, uint32_t r, int *waiting, int *warps) {
    fiber *f = &w->fibers[i];
    if (r == 0) {
        f->state = EXITED;
        w->wlive[i >> 5] &= ~(1u << (i & 31));
    } else if (r & WARP_STOP) {  // the continuation wrote its record (op, operands)
        f->state = AT_WARP;
        int32_t site = (int32_t)(r & ~WARP_STOP) - 1;
        rec_of(w, i)->site = site;
        *warps = 1;
        int q = i >> 5;
        if (!w->warr[q]) w->wsite[q] = site;
        else if (w->wsite[q] != site) w->wmixed[q] = 1;
        w->warr[q] |= 1u << (i & 31);
    } else {
        f->state = AT_BARRIER;
        f->bar_id = 0;
        f->bar_count = 0;
        f->bar_site = (int)(r - 1);
        f->bar_red = 0;
        f->bar_pred = 0;
        ++*waiting;
    }
}

// MODE_LOOPS, every lane of every warp just past one warp operation: each warp goes on by
// itself, from one warp operation to the next, until its lanes stop anywhere else (a barrier,
// the end, warp operations at different sites). Warps share nothing between two barriers that
// a race-free kernel may read, and their 32 frames stay in the cache where a round of the
// whole block would not keep 256. Warps run in the order (forward, reverse, a random order
// drawn here), and the lanes of a warp in a new order at each step. Returns the state every
// thread stopped in when all stopped at one barrier (its site + 1) or all ran to their end (0):
// their states are not settled then (the caller stays in its all-runnable mode); else -1, every
// thread's state settled.
static int32_t run_warps(worker *w, block_fn fn, int *waiting, int *warps) {
    launch_desc *d = w->d;
    int n = w->nthreads, nwarps = (n + 31) / 32;
    uint32_t worder[32], lorder[32], list[32];
    int64_t common = -2;  // where every warp stopped together: -2 none yet, -1 not one place
    make_order(worder, (uint32_t)nwarps, d->order, &w->rng);
    for (int qi = 0; qi < nwarps; ++qi) {
        int q = (int)worder[qi], lanes = n - 32 * q < 32 ? n - 32 * q : 32;
        // every lane resumes where the warp operation just completed left it; the block loop
        // may go on through the next ones itself (drawing the lanes' next order as here)
        int32_t from = (int32_t)(w->res[32 * q] & ~WARP_STOP);
        int32_t chain = lanes == 32;
        void *lo = d->order == ORDER_RANDOM ? &w->lanes : NULL;
        uint32_t same;
        for (;;) {
            if (lo && lanes == 32) {
                random_lanes(&w->lanes, 32 * (uint32_t)q, list);
            } else {
                make_order(lorder, (uint32_t)lanes, d->order, &w->lanes.rng);
                for (int l = 0; l < lanes; ++l) list[l] = 32 * (uint32_t)q + lorder[l];
            }
            same = fn(d->args, w->frames, d->frame_bytes, list, (uint32_t)lanes, w->tids,
                      w->res, from, chain, lo);
            if (!same || !(w->res[list[0]] & WARP_STOP)) break;
            from = (int32_t)(w->res[list[0]] & ~WARP_STOP);
            complete_warp(w, 32 * q, w->wlive[q], 0);
        }
        uint32_t r = w->res[list[0]];
        common = !same || common == -1 || (common >= 0 && common != (int64_t)r) ? -1 : (int64_t)r;
    }
    if (common >= 0) return (int32_t)common;
    for (int i = 0; i < n; ++i) settle(w, i, w->res[i], waiting, warps);
    fiber_ids(w);
    return -1;
}

// The fiber scheduler's rounds with calls instead of context switches: every round draws a new
// order and runs each runnable thread to its next barrier or its end; a round where none could
// run releases a barrier (release() as for fibers) or reports the block stuck. The threads of a
// round run in one call of the kernel's block loop (block_fn). While every thread is runnable
// (`all_run`, the common case) the fibers' states are not kept (they are all RUN; `res` says
// where each resumes), and a round where every thread stops at one barrier or one warp
// operation completes it without a look at each thread.
static void run_block_loops(worker *w) {
    launch_desc *d = w->d;
    int n = w->nthreads;
    block_fn fn = (block_fn)(void *)w->fn;
    memset(w->res, 0, (size_t)n * sizeof *w->res);
    w->recs = w->frames;
    w->rec_stride = d->frame_bytes;
    int nwarps = (n + 31) / 32;
    for (int k = 0; k < nwarps; ++k) {
        int lanes = n - 32 * k < 32 ? n - 32 * k : 32;
        w->wlive[k] = lanes == 32 ? 0xffffffffu : (1u << lanes) - 1;
        w->warr[k] = 0;
        w->wmixed[k] = 0;
    }
    int all_run = 1;
    int32_t from = 0;  // while all_run: the state every thread resumes from, or ANY_STATE
    if (setjmp(w->jb)) return;
    for (;;) {
        int ran = 0, waiting = 0, warps = 0;
        // forward and reverse need no new table (make_order would write the same one each round)
        const uint32_t *order = d->order == ORDER_RANDOM ? thread_order(w) : w->seq;
        const uint32_t *list = order;
        uint32_t count = (uint32_t)n;
        if (!all_run) {
            count = 0;
            for (int k = 0; k < n; ++k)
                if (w->fibers[order[k]].state == RUN) w->sel[count++] = order[k];
            list = w->sel;
        }
        if (count) {
            uint32_t same = fn(d->args, w->frames, d->frame_bytes, (uint32_t *)list, count,
                               w->tids, w->res, all_run ? from : ANY_STATE, 0, NULL);
            ran = 1;
            if (same && all_run) {
                uint32_t r0 = w->res[list[0]];
                from = (int32_t)r0;  // a barrier's release resumes them all there
                if (r0 == 0) return;  // every thread ran to its end
                if (r0 & WARP_STOP) {  // every lane of every warp at one warp operation
                    for (int k = 0; k < nwarps; ++k) complete_warp(w, 32 * k, w->wlive[k], 0);
                    int32_t all = run_warps(w, fn, &waiting, &warps);
                    if (all >= 0) {
                        // every thread at its end, or at one barrier: what the rounds below
                        // would do with the settled states (one more draw; then the end, or
                        // the release), without them
                        skip_order(w);
                        if (all == 0) return;
                        ++w->barriers;
                        from = all;
                        continue;
                    }
                    all_run = 0;
                    count = 0;  // settled
                }
                else {
                    // every thread at one barrier: the fiber scheduler's round where none runs
                    // (one more draw), then the release
                    skip_order(w);
                    ++w->barriers;
                    continue;
                }
            }
            if (all_run) {  // the fibers' states from here on
                for (int i = 0; i < n; ++i) w->fibers[i].state = RUN;
                fiber_ids(w);
                all_run = 0;
            }
            for (uint32_t k = 0; k < count; ++k)
                settle(w, (int)list[k], w->res[list[k]], &waiting, &warps);
        }
        // After a round every thread waits or has exited (each ran to its next stop). With
        // barriers only, the fiber scheduler's empty round (one more random draw) comes first,
        // so the orders are the fiber scheduler's; with warp operations it is skipped.
        int resumed = 0;
        if (warps) {
            // the warps whose live lanes all stopped at one site in this round: complete them
            // here, without a scan of the block (release_converged_warps' case)
            int done = 0;
            for (int k = 0; k < nwarps; ++k) {
                if (w->warr[k] && !w->wmixed[k] && w->warr[k] == w->wlive[k]) {
                    complete_warp(w, 32 * k, w->warr[k], 1);
                    ++done;
                }
                w->warr[k] = 0;
                w->wmixed[k] = 0;
            }
            resumed = done > 0;
        }
        if (!resumed && (!ran || warps)) {
            int live = 0;
            for (int i = 0; i < n; ++i) live += w->fibers[i].state != EXITED;
            if (!live) return;
            if (!release_converged_warps(w) && !release(w)) {
                report_stuck(w);
                w->faulted = 1;
                return;
            }
        } else if (!resumed && waiting == n) {
            // The common case in one step: every thread of the block waits at a barrier. The
            // fiber scheduler would draw one more order (a round where none runs), then
            // release() them all: the same draw and the same release here, without scanning
            // the block.
            skip_order(w);
            for (int i = 0; i < n; ++i) w->fibers[i].state = RUN;
            ++w->barriers;
        }
        all_run = 1;
        for (int i = 0; i < n && all_run; ++i) all_run = w->fibers[i].state == RUN;
        from = ANY_STATE;  // threads released by the fibers' rules: each from its own state
    }
}

static int ensure_frames(worker *w, size_t need) {
    if (w->frames && w->frames_cap >= need) return 1;
    free(w->frames);
    w->frames = aligned_alloc(64, need);
    w->frames_cap = w->frames ? need : 0;
    return w->frames != NULL;
}

static void run_block_fast(worker *w) {
    launch_desc *d = w->d;
    int n = w->nthreads;
    const uint32_t *order = thread_order(w);
    if (setjmp(w->jb)) return;
    for (int k = 0; k < n; ++k) {
        set_ids(w, order[k]);
        w->fn(d->args);
    }
}

// ---- block orders ---------------------------------------------------------------------------
// Forward and reverse need no table. A random order of up to RANDOM_TABLE_MAX blocks is a
// shuffled table; beyond that (a table would take gigabytes) a keyed bijection: a 4-round
// Feistel network on the smallest even-bit domain that holds every block, cycle-walked into
// [0, n) (at most 4 steps on average, since the domain is less than 4n).
#define RANDOM_TABLE_MAX (1u << 22)

typedef struct {
    int order;
    uint64_t n;
    uint32_t *table;       // random order of a small grid
    const uint32_t *list;  // the launch's block list: those blocks, in its order
    int half;              // Feistel: bits per half
    uint64_t keys[4];
} block_order;

static uint64_t feistel(const block_order *o, uint64_t x) {
    uint64_t mask = (1ull << o->half) - 1, l = x >> o->half, r = x & mask;
    for (int i = 0; i < 4; ++i) {
        uint64_t s = r ^ o->keys[i];
        uint64_t f = splitmix(&s) & mask;
        uint64_t t = l ^ f;
        l = r;
        r = t;
    }
    return (l << o->half) | r;
}

static uint64_t block_at(const block_order *o, uint64_t k) {
    if (o->list) return o->list[k];
    if (o->order == ORDER_FORWARD) return k;
    if (o->order == ORDER_REVERSE) return o->n - 1 - k;
    if (o->table) return o->table[k];
    uint64_t x = k;
    do x = feistel(o, x); while (x >= o->n);
    return x;
}

static int make_block_order(block_order *o, int order, uint64_t n, uint64_t seed) {
    memset(o, 0, sizeof *o);
    o->order = order;
    o->n = n;
    if (order != ORDER_RANDOM) return 1;
    uint64_t rng = seed;
    if (n <= RANDOM_TABLE_MAX) {
        o->table = malloc((size_t)n * sizeof(uint32_t));
        if (!o->table) return 0;
        make_order(o->table, (uint32_t)n, order, &rng);
        return 1;
    }
    int bits = 2;
    while (bits < 64 && (1ull << bits) < n) bits += 2;
    o->half = bits / 2;
    for (int i = 0; i < 4; ++i) o->keys[i] = splitmix(&rng);
    return 1;
}

// ---- signals ----------------------------------------------------------------------------------
// The handlers stay installed between launches (a launch checks with two queries that nobody
// replaced them since: installing them every time cost 4 us a launch). Outside a launch they
// pass every signal on: a fault to the handler that was there before (restored, and the
// faulting instruction runs again), SIGINT to the previous handler after noting no launch.
static const int fault_signals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL};
#define NFAULT_SIGNALS 4
#define ALTSTACK_BYTES (64u << 10)
static struct sigaction saved_fault[NFAULT_SIGNALS], saved_int;
static launch_desc *volatile current_launch;

static void on_fault(int sig, siginfo_t *si, void *ucv);
static void on_interrupt(int sig, siginfo_t *si, void *uc);

static int is_handler(const struct sigaction *a, void (*fn)(int, siginfo_t *, void *)) {
    return (a->sa_flags & SA_SIGINFO) && a->sa_sigaction == fn;
}

static void restore_fault_handlers(void) {
    for (int i = 0; i < NFAULT_SIGNALS; ++i) sigaction(fault_signals[i], &saved_fault[i], NULL);
}

static void on_fault(int sig, siginfo_t *si, void *ucv) {
    worker *w = tls_worker;
    if (w && w->armed) {
        w->armed = 0;
        launch_desc *d = w->d;
        if (record_fault(w, FAULT_SIGNAL)) {
            uint64_t a = (uint64_t)si->si_addr, sp = 0;
            int write = 0;
#if defined(__x86_64__) && defined(__linux__)
            ucontext_t *uc = ucv;
            sp = (uint64_t)uc->uc_mcontext.gregs[REG_RSP];
            write = sig == SIGSEGV && (uc->uc_mcontext.gregs[REG_ERR] & 2) != 0;
#else
            (void)ucv;
#endif
            d->fault_signal = sig;
            d->fault_addr = a;
            d->fault_kind = (uint32_t)write;
            // a stack overflow: an access just below the stack pointer, or into the guard
            // page of the running fiber's stack
            int stack = sp && a <= sp + 4096 && a + (256u << 10) >= sp;
            if (w->cur >= 0) {
                uint64_t lo = (uint64_t)(w->stacks + (size_t)w->cur * w->stack_bytes);
                stack |= a >= lo && a < lo + 4096;
            }
            d->fault_stack = sig == SIGSEGV && stack;
        }
        siglongjmp(w->sig_jb, 1);
    }
    // not device code: hand the signal back to whoever had it, and let it happen again
    restore_fault_handlers();
    if (si->si_code <= 0) raise(sig);
}

static void on_interrupt(int sig, siginfo_t *si, void *uc) {
    launch_desc *d = current_launch;
    if (d) {
        if (d->cancel) {
            static const char msg[] = "\nsirius: interrupted\n";
            ssize_t r = write(2, msg, sizeof msg - 1);
            (void)r;
            _exit(130);
        }
        d->cancel = 1;
    }
    if (saved_int.sa_flags & SA_SIGINFO) {
        if (saved_int.sa_sigaction) saved_int.sa_sigaction(sig, si, uc);
    } else if (saved_int.sa_handler != SIG_DFL && saved_int.sa_handler != SIG_IGN) {
        saved_int.sa_handler(sig);
    }
}

static void ensure_handlers(void) {
    struct sigaction cur, sa;
    memset(&sa, 0, sizeof sa);
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, NULL, &cur);
    if (!is_handler(&cur, on_fault)) {
        sa.sa_sigaction = on_fault;
        sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
        for (int i = 0; i < NFAULT_SIGNALS; ++i) {
            struct sigaction old;
            sigaction(fault_signals[i], &sa, &old);
            if (is_handler(&old, on_fault)) {  // never chain to ourselves
                memset(&old, 0, sizeof old);
                old.sa_handler = SIG_DFL;
            }
            saved_fault[i] = old;
        }
    }
    // SIGINT only where someone handles it (Python does); ignored or default stays so
    sigaction(SIGINT, NULL, &cur);
    int handled = (cur.sa_flags & SA_SIGINFO) ||
                  (cur.sa_handler != SIG_DFL && cur.sa_handler != SIG_IGN);
    if (handled && !is_handler(&cur, on_interrupt)) {
        saved_int = cur;
        sa.sa_sigaction = on_interrupt;
        sa.sa_flags = SA_SIGINFO | SA_RESTART;
        sigaction(SIGINT, &sa, NULL);
    }
}

// An alternate signal stack for the running thread (the SIGSEGV of a stack overflow needs
// one), installed once per thread: a thread made for one launch gets its worker's; a caller's
// thread (a worker when the launch has one) gets its own, freed when the thread ends.
static __thread int tls_altstack;
static pthread_key_t altstack_key;
static pthread_once_t altstack_once = PTHREAD_ONCE_INIT;

static void altstack_release(void *mem) {
    stack_t off = {.ss_flags = SS_DISABLE};
    sigaltstack(&off, NULL);
    free(mem);
}

static void altstack_key_init(void) { pthread_key_create(&altstack_key, altstack_release); }

static void ensure_altstack(worker *w, int launch_thread) {
    if (tls_altstack) return;
    char *mem = launch_thread ? w->altstack : malloc(ALTSTACK_BYTES);
    stack_t ss = {.ss_sp = mem, .ss_size = ALTSTACK_BYTES, .ss_flags = 0};
    if (!mem || sigaltstack(&ss, NULL) != 0) {
        if (!launch_thread) free(mem);
        return;
    }
    if (!launch_thread) {
        pthread_once(&altstack_once, altstack_key_init);
        pthread_setspecific(altstack_key, mem);
    }
    tls_altstack = 1;
}

// ---- launches ---------------------------------------------------------------------------------
typedef struct {
    worker *w;
    const block_order *order;
    uint64_t *next;    // shared claim counter
    int own_thread;    // a thread made for this launch (not the caller's)
} work;

static void *worker_main(void *p) {
    work *wk = p;
    worker *w = wk->w;
    launch_desc *d = w->d;
    uint64_t nblocks = wk->order->n;
    tls_worker = w;
    ensure_altstack(w, wk->own_thread);
    uint64_t chunk = nblocks / (8u * (uint64_t)d->nworkers);
    if (chunk < 1) chunk = 1;
    if (sigsetjmp(w->sig_jb, 0)) {  // a fault signal: recorded by on_fault
        sigset_t set;             // the handler's signal is still blocked (no mask saved:
        sigemptyset(&set);        // saving it costs a system call every launch)
        for (int i = 0; i < NFAULT_SIGNALS; ++i) sigaddset(&set, fault_signals[i]);
        pthread_sigmask(SIG_UNBLOCK, &set, NULL);
        w->cur = -1;
        w->faulted = 1;
        goto out;
    }
    w->armed = 1;
    for (;;) {
        uint64_t start = __atomic_fetch_add(wk->next, chunk, __ATOMIC_RELAXED);
        if (start >= nblocks) break;
        uint64_t end = start + chunk < nblocks ? start + chunk : nblocks;
        for (uint64_t k = start; k < end; ++k) {
            if (__atomic_load_n(&d->fault, __ATOMIC_RELAXED) != FAULT_NONE || d->cancel)
                goto out;
            uint64_t b = block_at(wk->order, k);
            w->block_linear = (uint32_t)b;
            w->ctx->ctaid[0] = (uint32_t)(b % d->grid[0]);
            w->ctx->ctaid[1] = (uint32_t)((b / d->grid[0]) % d->grid[1]);
            w->ctx->ctaid[2] = (uint32_t)(b / ((uint64_t)d->grid[0] * d->grid[1]));
            w->faulted = 0;
            if (d->use_fibers == MODE_LOOPS) run_block_loops(w);
            else if (d->use_fibers) run_block_fibers(w);
            else run_block_fast(w);
            if (w->faulted) goto out;
            if (d->done) d->done[8 * w->index] += 1;
        }
    }
out:
    w->armed = 0;
    tls_worker = NULL;
    return NULL;
}

static worker *workers;
static int nworkers_alloc;

static void check_redzones(launch_desc *d) {
    d->rz_found = 0;
    for (int i = 0; i < d->nredzones; ++i) {
        const uint8_t *lo = (const uint8_t *)d->rz_lo[i] - 256, *hi = (const uint8_t *)d->rz_hi[i];
        uint8_t bad = 0;
        for (int k = 0; k < 256; ++k) bad |= (uint8_t)(lo[k] ^ 0xCD) | (uint8_t)(hi[k] ^ 0xCD);
        d->rz_dirty[i] = bad != 0;
        d->rz_found += bad != 0;
    }
}

int sirius_launch(launch_desc *d) {
    int nw = d->nworkers;
    uint32_t nthreads = d->block[0] * d->block[1] * d->block[2];
    uint64_t nblocks = (uint64_t)d->grid[0] * d->grid[1] * d->grid[2];
    if (nblocks == 0 || nthreads == 0) return -1;
    if (nw > nworkers_alloc) {
        workers = realloc(workers, (size_t)nw * sizeof(worker));
        memset(workers + nworkers_alloc, 0, (size_t)(nw - nworkers_alloc) * sizeof(worker));
        nworkers_alloc = nw;
    }
    block_order order;
    if (d->block_list) {
        for (uint64_t k = 0; k < d->nblock_list; ++k)
            if (d->block_list[k] >= nblocks) return -1;
        memset(&order, 0, sizeof order);
        order.n = d->nblock_list;
        order.list = d->block_list;
        if (order.n == 0) return -1;
    } else if (!make_block_order(&order, d->order, nblocks, d->seed)) return -3;
    uint64_t next = 0;
    work *wk = calloc((size_t)nw, sizeof(work));
    pthread_t *th = calloc((size_t)nw, sizeof(pthread_t));
    d->fault = FAULT_NONE;
    for (int i = 0; i < nw; ++i) {
        worker *w = &workers[i];
        w->d = d;
        w->ctx = d->ctx[i];
        w->fn = d->fn[i];
        w->index = i;
        w->nthreads = (int)nthreads;
        w->cur = -1;
        w->barriers = 0;
        if (d->done) d->done[8 * i] = 0;
        w->trace_len = 0;
        w->rng = d->seed * 0x2545f4914f6cdd1dull + (uint64_t)i + 1;
        w->lanes.rng = d->seed * 0x9e3779b97f4a7c15ull + 0x7f4a7c15ull * ((uint64_t)i + 1);
        w->lanes.ready = 0;
        w->lanes.nbits = 0;
        w->perm = realloc(w->perm, nthreads * sizeof(uint32_t));
        if (d->order == ORDER_RANDOM)
            w->threads.perm = realloc(w->threads.perm,
                                      (size_t)THREAD_PERMS * nthreads * sizeof(uint32_t));
        w->threads.ready = 0;
        w->threads.nbits = 0;
        if (d->use_fibers == MODE_LOOPS) {
            w->seq = realloc(w->seq, nthreads * sizeof(uint32_t));
            w->sel = realloc(w->sel, nthreads * sizeof(uint32_t));
            w->res = realloc(w->res, nthreads * sizeof(uint32_t));
            make_order(w->seq, nthreads, d->order == ORDER_REVERSE ? ORDER_REVERSE
                                                                   : ORDER_FORWARD, NULL);
        }
        w->tids = realloc(w->tids, 3 * (size_t)nthreads * sizeof(uint32_t));
        make_tids(w->tids, d->block, nthreads);
        if (!w->altstack) w->altstack = malloc(ALTSTACK_BYTES);
        w->ctx->w = w;
        memcpy(w->ctx->ntid, d->block, sizeof d->block);
        memcpy(w->ctx->nctaid, d->grid, sizeof d->grid);
        w->ctx->icount = w->ctx->gld = w->ctx->gst = w->ctx->sld = w->ctx->sst = 0;
        memset(w->ctx->flops, 0, sizeof w->ctx->flops);
        if (d->use_fibers == MODE_LOOPS) {
            w->fibers = realloc(w->fibers, nthreads * sizeof(fiber));
            if (!ensure_frames(w, (size_t)nthreads * d->frame_bytes)) {
                free(order.table); free(wk); free(th);
                return -2;
            }
        } else if (d->use_fibers) {
            w->stack_bytes = d->stack_bytes;
            w->fibers = realloc(w->fibers, nthreads * sizeof(fiber));
            if (!ensure_stacks(w, (int)nthreads)) {
                free(order.table); free(wk); free(th);
                return -2;
            }
        }
        wk[i] = (work){w, &order, &next, nw > 1};
    }
    ensure_handlers();
    current_launch = d;
    if (nw == 1) worker_main(&wk[0]);
    else {
        for (int i = 0; i < nw; ++i) pthread_create(&th[i], NULL, worker_main, &wk[i]);
        for (int i = 0; i < nw; ++i) pthread_join(th[i], NULL);
    }
    current_launch = NULL;
    memset(d->counters, 0, sizeof d->counters);
    memset(d->flops, 0, sizeof d->flops);
    for (int i = 0; i < nw; ++i) {
        worker *w = &workers[i];
        for (int p = 0; p < 3; ++p) d->flops[p] += w->ctx->flops[p];
        d->counters[0] += w->ctx->icount;
        d->counters[1] += w->ctx->gld;
        d->counters[2] += w->ctx->gst;
        d->counters[3] += w->ctx->sld;
        d->counters[4] += w->ctx->sst;
        d->counters[5] += w->barriers;
        if (d->trace) { d->trace_ptr[i] = w->trace; d->trace_len[i] = w->trace_len; }
    }
    if (!d->check_bounds) check_redzones(d);
    free(order.table); free(wk); free(th);
    return 0;
}

// ---- NVVM intrinsics that have no LLVM equivalent, called by rewritten device code -----------
float sirius_nvvm_fmax_f(float a, float b) { return fmaxf(a, b); }
float sirius_nvvm_fmin_f(float a, float b) { return fminf(a, b); }
float sirius_nvvm_fabs_f(float a) { return fabsf(a); }
float sirius_nvvm_ex2_approx_f(float a) { return exp2f(a); }
float sirius_nvvm_ex2_approx_ftz_f(float a) { return exp2f(a); }
float sirius_nvvm_lg2_approx_f(float a) { return log2f(a); }
float sirius_nvvm_rsqrt_approx_f(float a) { return 1.0f / sqrtf(a); }
float sirius_nvvm_rsqrt_approx_ftz_f(float a) { return 1.0f / sqrtf(a); }
float sirius_nvvm_sqrt_rn_f(float a) { return sqrtf(a); }
float sirius_nvvm_sqrt_approx_f(float a) { return sqrtf(a); }
float sirius_nvvm_rcp_rn_f(float a) { return 1.0f / a; }
float sirius_nvvm_rcp_approx_ftz_f(float a) { return 1.0f / a; }
float sirius_nvvm_sin_approx_f(float a) { return sinf(a); }
float sirius_nvvm_cos_approx_f(float a) { return cosf(a); }
float sirius_nvvm_div_rn_f(float a, float b) { return a / b; }
float sirius_nvvm_div_approx_f(float a, float b) { return a / b; }
float sirius_nvvm_div_full(float a, float b) { return a / b; }
float sirius_nvvm_fma_rn_f(float a, float b, float c) { return fmaf(a, b, c); }
float sirius_nvvm_saturate_f(float x) { return x < 0.0f ? 0.0f : (x > 1.0f ? 1.0f : (x == x ? x : 0.0f)); }
double sirius_nvvm_fmax_d(double a, double b) { return fmax(a, b); }
double sirius_nvvm_fmin_d(double a, double b) { return fmin(a, b); }
int sirius_nvvm_mul24_i(int a, int b) { return ((a << 8) >> 8) * ((b << 8) >> 8); }
int sirius_nvvm_mulhi_i(int a, int b) { return (int)(((long long)a * b) >> 32); }
unsigned sirius_nvvm_mulhi_ui(unsigned a, unsigned b) { return (unsigned)(((unsigned long long)a * b) >> 32); }
int sirius_nvvm_f2i_rn(float x) { return (int)nearbyintf(x); }
int sirius_nvvm_f2i_rz(float x) { return (int)x; }
float sirius_nvvm_i2f_rn(int x) { return (float)x; }

// ---- device printf: CUDA's vprintf(format, packed argument buffer) ----------------------------
// Arguments are packed at their natural alignment; float arguments arrive promoted to double.
int sirius_rt_vprintf(const char *fmt, const char *args) {
    size_t off = 0;
    int printed = 0;
    char spec[64];
    flockfile(stdout);
    for (const char *p = fmt; *p; ++p) {
        if (*p != '%') { putc_unlocked(*p, stdout); ++printed; continue; }
        if (p[1] == '%') { putc_unlocked('%', stdout); ++p; ++printed; continue; }
        const char *q = p + 1;
        while (*q && strchr("-+ #0123456789.", *q)) ++q;
        int longs = 0;
        while (*q && strchr("hlzjtL", *q)) { longs += *q == 'l' || *q == 'z' || *q == 'j' || *q == 't'; ++q; }
        if (!*q || (size_t)(q - p + 2) > sizeof spec) break;
        char conv = *q;
        size_t n = (size_t)(q - p + 1);
        memcpy(spec, p, n);
        spec[n] = 0;
        size_t size = (strchr("fFeEgGaAsp", conv) || longs) ? 8 : 4;
        off = (off + size - 1) / size * size;
        const char *a = args + off;
        off += size;
        if (strchr("fFeEgGaA", conv)) { double v; memcpy(&v, a, 8); printed += printf(spec, v); }
        else if (conv == 's') { const char *v; memcpy(&v, a, 8); printed += printf(spec, v ? v : "(null)"); }
        else if (conv == 'p') { void *v; memcpy(&v, a, 8); printed += printf(spec, v); }
        else if (size == 8) {
            long long v; memcpy(&v, a, 8);
            char s2[64]; // normalise the length modifier to ll
            size_t k = 0;
            for (size_t i = 0; i + 1 < n; ++i) if (!strchr("hlzjtL", spec[i])) s2[k++] = spec[i];
            s2[k++] = 'l'; s2[k++] = 'l'; s2[k++] = conv; s2[k] = 0;
            printed += printf(s2, v);
        } else { int v; memcpy(&v, a, 4); printed += printf(spec, v); }
        p = q;
    }
    funlockfile(stdout);
    fflush(stdout);
    return printed;
}

// The trace buffers stay owned by the workers; Python copies them before the next launch.
_Static_assert(sizeof(trace_rec) == 24, "trace record layout (TRACE_DTYPE in device.py)");

// ---- libdevice: the __nv_* functions device code calls, on libm --------------------------------
#define F1(name, expr) float __nv_##name(float x) { return (expr); }
#define D1(name, expr) double __nv_##name(double x) { return (expr); }
#define F2(name, expr) float __nv_##name(float x, float y) { return (expr); }
#define D2(name, expr) double __nv_##name(double x, double y) { return (expr); }
F1(expf, expf(x)) F1(exp2f, exp2f(x)) F1(exp10f, exp10f(x)) F1(expm1f, expm1f(x))
F1(logf, logf(x)) F1(log2f, log2f(x)) F1(log10f, log10f(x)) F1(log1pf, log1pf(x))
F1(sqrtf, sqrtf(x)) F1(rsqrtf, 1.0f / sqrtf(x)) F1(cbrtf, cbrtf(x)) F1(rcbrtf, 1.0f / cbrtf(x))
F1(sinf, sinf(x)) F1(cosf, cosf(x)) F1(tanf, tanf(x)) F1(asinf, asinf(x)) F1(acosf, acosf(x))
F1(atanf, atanf(x)) F1(sinhf, sinhf(x)) F1(coshf, coshf(x)) F1(tanhf, tanhf(x))
F1(asinhf, asinhf(x)) F1(acoshf, acoshf(x)) F1(atanhf, atanhf(x)) F1(erff, erff(x))
F1(erfcf, erfcf(x)) F1(lgammaf, lgammaf(x)) F1(tgammaf, tgammaf(x)) F1(fabsf, fabsf(x))
F1(floorf, floorf(x)) F1(ceilf, ceilf(x)) F1(roundf, roundf(x)) F1(truncf, truncf(x))
F1(rintf, rintf(x)) F1(nearbyintf, nearbyintf(x)) F1(fast_expf, expf(x))
F1(fast_exp10f, exp10f(x)) F1(fast_logf, logf(x)) F1(fast_log2f, log2f(x))
F1(fast_log10f, log10f(x)) F1(fast_sinf, sinf(x)) F1(fast_cosf, cosf(x))
F1(fast_tanf, tanf(x)) F1(saturatef, x < 0.0f ? 0.0f : (x > 1.0f ? 1.0f : (x == x ? x : 0.0f)))
F1(frcp_rn, 1.0f / x) F1(fsqrt_rn, sqrtf(x)) F1(erfinvf, 0.0f * x + NAN)
F2(powf, powf(x, y)) F2(fast_powf, powf(x, y)) F2(atan2f, atan2f(x, y)) F2(fmodf, fmodf(x, y))
F2(fmaxf, fmaxf(x, y)) F2(fminf, fminf(x, y)) F2(hypotf, hypotf(x, y))
F2(copysignf, copysignf(x, y)) F2(fdimf, fdimf(x, y)) F2(remainderf, remainderf(x, y))
F2(fdividef, x / y) F2(fast_fdividef, x / y) F2(fdiv_rn, x / y) F2(fadd_rn, x + y)
F2(fmul_rn, x * y) F2(fsub_rn, x - y) F2(nextafterf, nextafterf(x, y))
D1(exp, exp(x)) D1(exp2, exp2(x)) D1(exp10, exp10(x)) D1(expm1, expm1(x)) D1(log, log(x))
D1(log2, log2(x)) D1(log10, log10(x)) D1(log1p, log1p(x)) D1(sqrt, sqrt(x))
D1(rsqrt, 1.0 / sqrt(x)) D1(cbrt, cbrt(x)) D1(sin, sin(x)) D1(cos, cos(x)) D1(tan, tan(x))
D1(asin, asin(x)) D1(acos, acos(x)) D1(atan, atan(x)) D1(sinh, sinh(x)) D1(cosh, cosh(x))
D1(tanh, tanh(x)) D1(erf, erf(x)) D1(erfc, erfc(x)) D1(fabs, fabs(x)) D1(floor, floor(x))
D1(ceil, ceil(x)) D1(round, round(x)) D1(trunc, trunc(x)) D1(rint, rint(x))
D1(lgamma, lgamma(x)) D1(tgamma, tgamma(x)) D1(drcp_rn, 1.0 / x)
D2(pow, pow(x, y)) D2(atan2, atan2(x, y)) D2(fmod, fmod(x, y)) D2(fmax, fmax(x, y))
D2(fmin, fmin(x, y)) D2(hypot, hypot(x, y)) D2(copysign, copysign(x, y))
D2(dadd_rn, x + y) D2(dmul_rn, x * y) D2(ddiv_rn, x / y)
float __nv_fmaf(float x, float y, float z) { return fmaf(x, y, z); }
float __nv_fmaf_rn(float x, float y, float z) { return fmaf(x, y, z); }
double __nv_fma(double x, double y, double z) { return fma(x, y, z); }
double __nv_fma_rn(double x, double y, double z) { return fma(x, y, z); }
float __nv_ldexpf(float x, int e) { return ldexpf(x, e); }
float __nv_powif(float x, int e) { return powf(x, (float)e); }
float __nv_frexpf(float x, int *e) { return frexpf(x, e); }
void __nv_sincosf(float x, float *s, float *c) { *s = sinf(x); *c = cosf(x); }
void __nv_fast_sincosf(float x, float *s, float *c) { *s = sinf(x); *c = cosf(x); }
int __nv_isnanf(float x) { return isnan(x); }
int __nv_isinff(float x) { return isinf(x); }
int __nv_finitef(float x) { return isfinite(x); }
int __nv_isnand(double x) { return isnan(x); }
int __nv_isinfd(double x) { return isinf(x); }
int __nv_signbitf(float x) { return signbit(x) != 0; }
int __nv_max(int a, int b) { return a > b ? a : b; }
int __nv_min(int a, int b) { return a < b ? a : b; }
unsigned __nv_umax(unsigned a, unsigned b) { return a > b ? a : b; }
unsigned __nv_umin(unsigned a, unsigned b) { return a < b ? a : b; }
long long __nv_llmax(long long a, long long b) { return a > b ? a : b; }
long long __nv_llmin(long long a, long long b) { return a < b ? a : b; }
unsigned long long __nv_ullmax(unsigned long long a, unsigned long long b) { return a > b ? a : b; }
unsigned long long __nv_ullmin(unsigned long long a, unsigned long long b) { return a < b ? a : b; }
int __nv_abs(int a) { return a < 0 ? -a : a; }
long long __nv_llabs(long long a) { return a < 0 ? -a : a; }
int __nv_popc(unsigned a) { return __builtin_popcount(a); }
int __nv_popcll(unsigned long long a) { return __builtin_popcountll(a); }
int __nv_clz(unsigned a) { return a ? __builtin_clz(a) : 32; }
int __nv_clzll(unsigned long long a) { return a ? __builtin_clzll(a) : 64; }
int __nv_ffs(unsigned a) { return __builtin_ffs((int)a); }
int __nv_ffsll(unsigned long long a) { return __builtin_ffsll((long long)a); }
unsigned __nv_brev(unsigned a) { return __builtin_bitreverse32(a); }
int __nv_mulhi(int a, int b) { return (int)(((long long)a * b) >> 32); }
unsigned __nv_umulhi(unsigned a, unsigned b) { return (unsigned)(((unsigned long long)a * b) >> 32); }
int __nv_mul24(int a, int b) { return ((a << 8) >> 8) * ((b << 8) >> 8); }
int __nv_float2int_rn(float x) { return (int)nearbyintf(x); }
int __nv_float2int_rz(float x) { return (int)x; }
int __nv_float2int_rd(float x) { return (int)floorf(x); }
int __nv_float2int_ru(float x) { return (int)ceilf(x); }
unsigned __nv_float2uint_rz(float x) { return (unsigned)x; }
float __nv_int2float_rn(int x) { return (float)x; }
float __nv_uint2float_rn(unsigned x) { return (float)x; }
int __nv_float_as_int(float x) { int i; memcpy(&i, &x, 4); return i; }
float __nv_int_as_float(int i) { float x; memcpy(&x, &i, 4); return x; }
unsigned __nv_float_as_uint(float x) { unsigned i; memcpy(&i, &x, 4); return i; }
float __nv_uint_as_float(unsigned i) { float x; memcpy(&x, &i, 4); return x; }
long long __nv_double_as_longlong(double x) { long long i; memcpy(&i, &x, 8); return i; }
double __nv_longlong_as_double(long long i) { double x; memcpy(&x, &i, 8); return x; }
float __nv_double2float_rn(double x) { return (float)x; }
