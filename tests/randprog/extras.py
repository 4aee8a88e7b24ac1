"""The constructs of issue 12 in random programs: pointer tables, `__device__` variables,
`__noinline__` device functions and inline PTX stores (what `sirius fuse` once fused wrongly,
programs A and B of the issue). A mixin of generator.Builder.

A program uses them or not as a whole (`Features.percent` of the programs; the decision comes
from a stream of its own, so a program without them is the one the generator made before they
existed), and then each construct it may use with some probability:

  * "tables": a one-thread launch stores device addresses into a `float**` buffer
    (`tab[k] = p_k`, sometimes `p_k + d` with the readers subtracting d again), before or
    after those buffers are written; later launches reach a buffer through `tab[k]` instead
    of a pointer argument, for reading or writing;
  * "host_tables": the same table filled by the host (a host array of device pointers copied
    with cudaMemcpy);
  * "gptr": the same through a `__device__ float*` variable set by a one-thread launch;
  * "globals": results go to `__device__` float arrays and scalars (a scalar from the thread
    of one element, `side`, as in program B), read by later launches (`b[0]` broadcasts read
    scalars); a variable still unread at the end is copied to an output buffer by a launch;
  * "fn": maps load and store through `__noinline__` device functions with pointer
    arguments, or through a `__device__` variable's own getter and setter ("gfn");
  * "asm": maps store with `asm volatile("st.global.f32 ...")`.

Every construct is outside host loops. The builder keeps, for each table entry and pointer
variable, the pointer variable whose buffer it holds (renamed when a ping-pong loop swaps
pointers an odd number of times); the reference resolves them to buffers as the program runs.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import TYPE_CHECKING

from tests.randprog import kernels as K
from tests.randprog.access import LD_F, PUT_PTR, ST_F, Bind, global_accessors, pointer_setter
from tests.randprog.pointers import SetPtrs
from tests.randprog.program import HostTable, Ptr

if TYPE_CHECKING:
    from tests.randprog.generator import Chooser, Var


@dataclass(frozen=True, slots=True)
class Features:
    """Which constructs of issue 12 programs may use, and in how many programs (percent).

    All are on by default. `host_tables` came on when the executor began writing real device
    addresses into host-written tables (issue 12 item 4), `asm_stores` when its PTX lifter
    learnt `ld`/`st` (the store is then an ordinary access: counted and bounds-checked). Seeds
    found before either keep their programs with `Features.parse("-host-tables,-asm")`."""

    device_tables: bool = True
    globals: bool = True
    device_functions: bool = True
    host_tables: bool = True
    asm_stores: bool = True
    percent: int = 40

    NAMES = {"device-tables": "device_tables", "globals": "globals",
             "device-functions": "device_functions", "host-tables": "host_tables",
             "asm": "asm_stores"}

    @classmethod
    def parse(cls, text: str) -> Features:
        """"default", "none", "all", or a comma list of +NAME / -NAME changes to the default
        (NAME one of device-tables, globals, device-functions, host-tables, asm), and
        optionally percent=N."""
        off = {f.name: False for f in fields(cls) if f.name != "percent"}
        base = {"default": cls(), "none": cls(**off),
                "all": cls(**{k: True for k in off})}
        words = [w.strip() for w in text.split(",") if w.strip()]
        out = cls()
        for w in words:
            if w in base:
                out = replace(base[w], percent=out.percent)
            elif w.startswith("percent="):
                out = replace(out, percent=int(w.removeprefix("percent=")))
            elif w[:1] in "+-" and w[1:] in cls.NAMES:
                out = replace(out, **{cls.NAMES[w[1:]]: w[0] == "+"})
            else:
                names = ", ".join(cls.NAMES)
                raise ValueError(f"unknown feature {w!r} (default, none, all, +NAME or -NAME "
                                 f"with NAME one of {names}, percent=N)")
        return out

    def spec(self) -> str:
        """The `parse` text of these features ("" for the default)."""
        d = Features()
        out = [("+" if getattr(self, a) else "-") + n for n, a in self.NAMES.items()
               if getattr(self, a) != getattr(d, a)]
        out += [f"percent={self.percent}"] if self.percent != d.percent else []
        return ",".join(out)

    def constructs(self) -> tuple[str, ...]:
        """The builder's construct names these features allow."""
        out = []
        out += ["tables"] if self.device_tables else []
        out += ["host_tables"] if self.host_tables else []
        out += ["globals", "gptr"] if self.globals else []
        out += ["fn"] if self.device_functions else []
        out += ["asm"] if self.asm_stores else []
        return tuple(out)


DEFAULT = Features()


def chance(ch: Chooser, percent: int) -> bool:
    return ch.integer(0, 99) < percent


def choice(ch: Chooser, options):
    return options[ch.integer(0, len(options) - 1)]


class Extras:
    """Builder state and steps for the constructs of issue 12 (see the module docstring)."""

    ch: Chooser
    vars: dict[str, Var]
    order: list[str]
    recent: str | None

    def init_extras(self, features: Features, xch: Chooser) -> None:
        self.on: frozenset[str] = frozenset()
        allowed = features.constructs()
        if allowed and chance(xch, features.percent):
            on = [c for c in allowed if chance(xch, 60)]
            self.on = frozenset(on or [choice(xch, allowed)])
        self.tables: dict[str, list[tuple[str, int]]] = {}   # table -> (variable, offset)
        self.gptrs: dict[str, tuple[str, int]] = {}          # `float*` global -> same
        self.gorder: list[str] = []                          # float globals
        self.gpointers: list[str] = []                       # pointer globals
        self.helpers: dict[str, str] = {}                    # device function texts

    @property
    def extras(self) -> bool:
        return bool(self.on)

    # ---- bindings ----------------------------------------------------------------------------
    def targeted(self, name: str) -> bool:
        return (any(n == name for es in self.tables.values() for n, _ in es)
                or any(n == name for n, _ in self.gptrs.values()))

    def ptr(self, v: Var) -> Ptr:
        """How a launch (outside host loops) reaches `v`: a global by name, a buffer through a
        table entry or pointer variable holding it (mostly, when one does) or an argument."""
        if v.kind == "global":
            return Ptr(v.name, via="global")
        ways = [Ptr(t, -d, via="table", index=k) for t, es in self.tables.items()
                for k, (n, d) in enumerate(es) if n == v.name]
        ways += [Ptr(g, -d, via="gptr") for g, (n, d) in self.gptrs.items() if n == v.name]
        if ways and chance(self.ch, 80):
            return choice(self.ch, ways)
        return Ptr(v.name)

    def bind(self, p: Ptr) -> Bind:
        if not p.via:
            return Bind()
        scalar = p.via == "global" and self.vars[p.var].scalar
        return Bind(p.via, p.var, p.index, p.offset, scalar)

    def note_helpers(self, op, binds: tuple[Bind, ...]) -> None:
        mem = getattr(op, "mem", "")
        if isinstance(op, SetPtrs):
            if mem == "fn":
                key = op.target or "put_ptr"
                self.helpers[key] = pointer_setter(op.target) if op.target else PUT_PTR
            return
        if mem in ("fn", "gfn"):
            self.helpers["ld_f"], self.helpers["st_f"] = LD_F, ST_F
        if mem == "gfn":
            for b in binds:
                if b.kind == "global":
                    self.helpers[b.name] = global_accessors(b.name, b.scalar)

    def rename_targets(self, a: str, b: str) -> None:
        """Pointer variables `a` and `b` swapped buffers (a ping-pong loop of odd trips)."""
        swap = {a: b, b: a}
        self.tables = {t: [(swap.get(n, n), d) for n, d in es] for t, es in self.tables.items()}
        self.gptrs = {g: (swap.get(n, n), d) for g, (n, d) in self.gptrs.items()}

    # ---- variables ---------------------------------------------------------------------------
    def pending_shapes(self) -> list[tuple[int, int]]:
        """Shapes of the buffers a table or pointer variable holds that nothing wrote yet."""
        return [self.vars[n].shape() for n in self.order
                if self.vars[n].kind == "float" and not self.vars[n].written
                and not self.vars[n].input and self.targeted(n)]

    def new_global(self, rows: int, cols: int) -> Var:
        from tests.randprog.generator import Var

        scalar = rows == cols == 1 and chance(self.ch, 60)
        v = Var(f"g_{'s' if scalar else 'a'}{len(self.gorder)}", rows, cols, 1.0,
                kind="global", scalar=scalar)
        self.vars[v.name] = v
        self.gorder.append(v.name)
        return v

    def extra_dest(self, rows: int, cols: int, operands: tuple[Var, ...],
                   globals_ok: bool) -> Var | None:
        """A destination only these constructs offer: a buffer a table or pointer variable
        holds and nothing wrote yet, or a new `__device__` array or scalar."""
        if not self.extras:
            return None
        pending = [self.vars[n] for n in self.order
                   if self.vars[n].kind == "float" and not self.vars[n].written
                   and not self.vars[n].input and self.vars[n].shape() == (rows, cols)
                   and self.targeted(n) and all(self.vars[n] is not o for o in operands)]
        if pending and chance(self.ch, 70):
            return choice(self.ch, pending)
        if globals_ok and "globals" in self.on and chance(self.ch, 30):
            return self.new_global(rows, cols)
        return None

    # ---- steps -------------------------------------------------------------------------------
    def can_setp(self) -> list[str]:
        return [k for k in ("tables", "host_tables", "gptr") if k in self.on]

    def step_setp(self) -> bool:
        """Store the addresses of 1-3 buffers (live ones, or new ones of a live shape that a
        later launch will write) into a table or a pointer variable."""
        ch = self.ch
        kinds = self.can_setp()
        if not kinds:
            return False
        kind = choice(ch, kinds)
        n = 1 if kind == "gptr" else ch.integer(1, 3)
        targets: list[tuple[str, int]] = []
        for _ in range(n):
            live = [self.vars[m] for m in self.order
                    if self.vars[m].kind == "float" and (self.vars[m].written
                                                         or self.vars[m].input)
                    and all(m != t for t, _ in targets)]
            recent = [v for v in live if v.name == self.recent]
            if live and chance(ch, 50):
                v = recent[0] if recent and chance(ch, 50) else choice(ch, live)
            else:
                # a shape the next launches are likely to produce: the last result's
                like = recent[0] if recent and chance(ch, 60) else choice(ch, live) if live \
                    else None
                v = self.new_var("t", *(like.shape() if like and chance(ch, 80)
                                        else self.dims()))
            d = ch.integer(1, v.elems - 1) if v.elems > 1 and chance(ch, 25) else 0
            targets.append((v.name, d))
        ptrs = [Ptr(m, d) for m, d in targets]
        mem = "fn" if "fn" in self.on and chance(ch, 40) else ""
        if kind == "gptr":
            if self.gpointers and chance(ch, 30):
                g = choice(ch, self.gpointers)         # point an old variable elsewhere
            else:
                g = f"g_p{len(self.gpointers)}"
                self.gpointers.append(g)
            op = SetPtrs(1, g, mem)
            self.emit(self.call(op, ptrs), op.cost)
            self.gptrs[g] = targets[0]
            return True
        tab = self.new_var("tab", 1, n)
        tab.kind, tab.host = "table", kind == "host_tables"
        if tab.host:
            self.emit(HostTable(tab.name, tuple(ptrs)), 0)
        else:
            op = SetPtrs(n, "", mem)
            self.emit(self.call(op, [Ptr(tab.name), *ptrs]), op.cost)
        self.tables[tab.name] = targets
        return True

    def decorate(self, op: K.Elementwise) -> K.Elementwise:
        """A map with some of these constructs: its first input read backwards, a side store
        of one element's result (`side`), loads and stores through device functions or
        inline PTX (`mem`)."""
        if not self.extras:
            return op
        ch = self.ch
        rev = not op.inplace and chance(ch, 20)
        side = -1
        if chance(ch, 30):
            side = op.n - 1 if chance(ch, 50) else ch.integer(0, op.n - 1)
        mems = ["", "", ""] + (["fn", "gfn"] if "fn" in self.on else []) + (
            ["asm"] if "asm" in self.on else [])
        return replace(op, rev=rev, side=side, mem=choice(ch, mems))

    def scalar_dest(self, operands: tuple[Var, ...]) -> Var:
        """Where a side store goes: a dead or pending 1 x 1 variable, a new `__device__`
        scalar, or a new one-float buffer."""
        cands = [self.vars[n] for n in self.order + self.gorder
                 if self.vars[n].kind in ("float", "global") and self.vars[n].shape() == (1, 1)
                 and not self.vars[n].input
                 and ((self.vars[n].written and self.vars[n].read_since_write)
                      or (not self.vars[n].written and self.targeted(n)))
                 and all(self.vars[n] is not o for o in operands)]
        if cands and chance(self.ch, 50):
            return choice(self.ch, cands)
        if "globals" in self.on and chance(self.ch, 60):
            v = self.new_global(1, 1)
            return v
        return self.new_var("t", 1, 1)

    def copy_out_globals(self) -> None:
        """A launch per `__device__` array or scalar written and not read since, copying it
        to a new buffer (its value is checked there)."""
        for name in list(self.gorder):
            g = self.vars[name]
            if not g.written or g.read_since_write:
                continue
            mem = "gfn" if "fn" in self.on and chance(self.ch, 50) else ""
            op = K.Elementwise("scale", 1.0, g.rows, g.cols, "1d",
                               (choice(self.ch, K_BLOCKS), 1, 1), mem=mem)
            y = self.new_var("t", g.rows, g.cols)
            self.read(g)
            self.emit(self.call(op, [self.ptr(g), self.ptr(y)]), op.cost)
            self.wrote(y, g.bound)


K_BLOCKS = (32, 64, 128, 256)
