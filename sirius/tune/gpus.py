"""The GPUs the cost model knows: one `Gpu` per product, every number with where it comes from.

The vendor documents (datasheets and architecture whitepapers) are named in each entry's
`sources`; where a figure was read from a third-party transcription of a vendor document (the
vendor PDF itself could not be opened from here), the page is named too. A figure no datasheet
gives is *derived* (the derivation is written out) or an *assumption* (said so):

- `boost_mhz` for H100/H200/B200 and `sms` for L4 and B200 are derived from the peak FP32 rate:
  peak FP32 = SMs x 128 FP32 lanes x 2 FLOPs (FMA) x clock (64 lanes on V100 and A100).
- `launch_us` (per-launch overhead) is in no datasheet. 3.0 us is the raw `cuLaunchKernel` cost
  measured on a GB200 in meta-pytorch/tritonbench pull request #1017 (3.0 us with no arguments,
  3.3 us with 19); it is used for every GPU here: an assumption until `--calibrate` measures it.
- Per-SM limits (threads, blocks, registers, shared memory per SM and per block, the 1 KiB the
  system reserves per block) are the CUDA C++ Programming Guide's "Technical Specifications per
  Compute Capability" table, the same source as sirius/backend/limits.py.
- Issue rate: every SM here has 4 warp schedulers that each issue one warp instruction per clock
  (the Volta, Ampere, Hopper, Ada and Blackwell whitepapers: "four processing blocks" per SM).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from sirius.diagnostics import SiriusError

KIB = 1024
MIB = 1024 * KIB

_GUIDE = ("CUDA C++ Programming Guide, 'Technical Specifications per Compute Capability' "
          "(cc {cc})")
_LAUNCH = ("assumption: raw cuLaunchKernel cost measured on GB200 (meta-pytorch/tritonbench "
           "PR #1017: 3.0 us); no datasheet gives a launch overhead")


@dataclass(frozen=True, slots=True)
class Gpu:
    """Peak rates and per-SM limits of one GPU product."""

    name: str
    arch: str                    # the sm_XY the program is assembled for
    sms: int
    boost_mhz: float
    dram_gbps: float             # GB/s, 1e9 bytes per second
    fp32_tflops: float           # non-tensor (FMA counted as 2 FLOPs)
    fp16_tflops: float | None    # non-tensor (half2); None: not given, FP32 rate used
    fp64_tflops: float | None    # non-tensor; None: not given, FP32 rate used
    fp16_tensor_tflops: float    # dense (without sparsity); listed, not used by the model
    l2_bytes: int                # a launch whose footprint fits is charged its footprint
    smem_per_sm: int             # bytes
    smem_per_block: int          # bytes, opt-in maximum (static + dynamic)
    smem_reserved_per_block: int
    registers_per_sm: int
    max_threads_per_sm: int
    max_blocks_per_sm: int
    launch_us: float
    sources: tuple[tuple[str, str], ...]
    schedulers_per_sm: int = 4
    register_alloc_unit: int = 256  # registers per warp are allocated in these units
    warp_size: int = 32

    @property
    def max_warps_per_sm(self) -> int:
        return self.max_threads_per_sm // self.warp_size

    @property
    def clock_hz(self) -> float:
        return self.boost_mhz * 1e6

    @property
    def issue_rate(self) -> float:
        """Thread instructions per second at full issue: SMs x schedulers x 32 lanes x clock."""
        return self.sms * self.schedulers_per_sm * self.warp_size * self.clock_hz

    @property
    def dram_bytes_per_s(self) -> float:
        return self.dram_gbps * 1e9

    def flops_per_s(self, precision: str) -> float:
        """Peak non-tensor FLOP/s for `precision` (f16, f32, f64); FP32's where not given."""
        tf = {"f16": self.fp16_tflops, "f64": self.fp64_tflops}.get(precision)
        return (tf if tf is not None else self.fp32_tflops) * 1e12

    def to_json(self) -> dict:
        out = {k: getattr(self, k) for k in self.__slots__ if k != "sources"}
        out["sources"] = dict(self.sources)
        out["max_warps_per_sm"] = self.max_warps_per_sm
        out["issue_rate_per_s"] = self.issue_rate
        return out


def _limits(cc: str) -> dict:
    """Per-SM limits of a compute capability (CUDA C++ Programming Guide)."""
    table = {  # smem/SM KiB, smem/block KiB, reserved/block, threads/SM, blocks/SM
        "7.0": (96, 96, 0, 2048, 32),
        "8.0": (164, 163, KIB, 2048, 32),
        "8.9": (100, 99, KIB, 1536, 24),
        "9.0": (228, 227, KIB, 2048, 32),
        "10.0": (228, 227, KIB, 2048, 32),
    }
    sm, blk, res, thr, bl = table[cc]
    return dict(smem_per_sm=sm * KIB, smem_per_block=blk * KIB, smem_reserved_per_block=res,
                registers_per_sm=64 * KIB, max_threads_per_sm=thr, max_blocks_per_sm=bl)


def _gpu(name: str, arch: str, cc: str, sources: dict[str, str], **kw) -> Gpu:
    src = {**sources, "per-SM limits": _GUIDE.format(cc=cc), "launch_us": _LAUNCH}
    return Gpu(name=name, arch=arch, launch_us=3.0, sources=tuple(src.items()), **_limits(cc),
               **kw)


GPUS: dict[str, Gpu] = {g.name: g for g in (
    _gpu("V100 SXM2", "sm_70", "7.0", {
        "datasheet": "NVIDIA Tesla V100 datasheet (SXM2): 15.7 TFLOPS FP32, 7.8 TFLOPS FP64, "
                     "125 TFLOPS tensor, 900 GB/s HBM2; transcribed in AnandTech's A100 80GB "
                     "comparison table (anandtech.com/show/16250)",
        "sms": "NVIDIA Tesla V100 GPU Architecture whitepaper, Table 1: 80 SMs, 64 FP32 "
               "cores/SM, shared memory configurable up to 96 KB/SM, 256 KB registers/SM",
        "boost_mhz": "1530 MHz: AnandTech table above; = 15.7 TFLOPS / (80 x 64 x 2)",
        "fp16_tflops": "derived: 2 x FP32 (half2; cc 7.0 does 128 FP16 vs 64 FP32 results per "
                       "clock per SM, CUDA C++ Programming Guide, arithmetic throughput table)",
        "l2_bytes": "Volta whitepaper Table 1: 6144 KB",
    }, sms=80, boost_mhz=1530, dram_gbps=900, fp32_tflops=15.7, fp16_tflops=31.4,
        fp64_tflops=7.8, fp16_tensor_tflops=125, l2_bytes=6 * MIB),
    _gpu("A100 SXM 40GB", "sm_80", "8.0", {
        "datasheet": "NVIDIA A100 Tensor Core GPU datasheet: 19.5 TFLOPS FP32, 9.7 FP64, 312 "
                     "TFLOPS FP16 tensor dense (624 sparse), 1,555 GB/s (40GB); transcribed at "
                     "glennklockwood.com/garden/processors/A100",
        "whitepaper": "NVIDIA A100 Tensor Core GPU Architecture whitepaper: 108 SMs, boost "
                      "1410 MHz, up to 164 KB shared memory per SM, 78 TFLOPS FP16 non-tensor",
        "l2_bytes": "A100 whitepaper: 40 MB L2",
    }, sms=108, boost_mhz=1410, dram_gbps=1555, fp32_tflops=19.5, fp16_tflops=78,
        fp64_tflops=9.7, fp16_tensor_tflops=312, l2_bytes=40 * MIB),
    _gpu("A100 SXM 80GB", "sm_80", "8.0", {
        "datasheet": "NVIDIA A100 Tensor Core GPU datasheet (80GB SXM): 2,039 GB/s; compute as "
                     "the 40GB part (glennklockwood.com/garden/processors/A100)",
        "whitepaper": "NVIDIA A100 Tensor Core GPU Architecture whitepaper: 108 SMs, 1410 MHz, "
                      "78 TFLOPS FP16 non-tensor",
        "l2_bytes": "A100 whitepaper: 40 MB L2",
    }, sms=108, boost_mhz=1410, dram_gbps=2039, fp32_tflops=19.5, fp16_tflops=78,
        fp64_tflops=9.7, fp16_tensor_tflops=312, l2_bytes=40 * MIB),
    _gpu("H100 SXM", "sm_90", "9.0", {
        "datasheet": "NVIDIA H100 Tensor Core GPU datasheet (SXM): 132 SMs, 67 TFLOPS FP32, 34 "
                     "FP64, 1,979 TFLOPS FP16 tensor with sparsity (989 dense), 3,350 GB/s, "
                     "256 KB registers/SM; transcribed at archive-lib.hpctech.co.jp/gpuproduct/"
                     "nvidia-h100.html",
        "whitepaper": "NVIDIA H100 Tensor Core GPU Architecture whitepaper, peak table: FP32 "
                      "66.9, FP16 non-tensor 133.8, FP16 tensor 989.4 TFLOPS; boost 1.98 GHz "
                      "(glennklockwood.com/garden/processors/h100)",
        "boost_mhz": "derived: 66.9 TFLOPS / (132 SMs x 128 x 2) = 1980 MHz",
        "l2_bytes": "H100 datasheet transcription above: 50 MB L2",
    }, sms=132, boost_mhz=1980, dram_gbps=3350, fp32_tflops=66.9, fp16_tflops=133.8,
        fp64_tflops=33.5, fp16_tensor_tflops=989.4, l2_bytes=50 * MIB),
    _gpu("H200 SXM", "sm_90", "9.0", {
        "datasheet": "NVIDIA H200 Tensor Core GPU datasheet: 141 GB HBM3e at 4.8 TB/s, 67 "
                     "TFLOPS FP32, 34 FP64, 1,979 TFLOPS FP16 tensor with sparsity (989 dense); "
                     "same GH100 compute as H100 SXM (lzwjava.github.io/nvidia-h200-gpu-specs-en,"
                     " aiwiki.ai/wiki/nvidia_h200)",
        "sms": "132 SMs: the H100 SXM configuration (the H200 datasheet does not list SMs); "
               "the device's multiprocessor count read on an NVIDIA H200 on 2026-11-29 "
               "(docs/measurements/h200-2026-11-29) agrees",
        "boost_mhz": "derived as for H100 SXM: 1980 MHz; nvidia-smi's clocks.max.sm on an "
                     "NVIDIA H200 on 2026-11-29 agrees (docs/measurements/h200-2026-11-29/"
                     "smi.csv: 1980 MHz)",
        "fp16_tflops": "H100 SXM's 133.8 (same SM; not in the H200 datasheet)",
        "l2_bytes": "measured: 60 MiB (62,914,560 bytes), read from the device "
                    "(cudaDevAttrL2CacheSize, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE through "
                    "pycuda) of an NVIDIA H200 on 2026-11-29 (docs/measurements/"
                    "h200-2026-11-29, each bench's device.l2_bytes); not in the H200 "
                    "datasheet (this entry said H100 SXM's 50 MB before)",
        "smem_per_block": "227 KiB: the guide's cc 9.0 figure; the device's opt-in maximum read "
                          "on 2026-11-29 agrees (max_smem_per_block_optin 232,448 bytes)",
    }, sms=132, boost_mhz=1980, dram_gbps=4800, fp32_tflops=66.9, fp16_tflops=133.8,
        fp64_tflops=33.5, fp16_tensor_tflops=989.4, l2_bytes=60 * MIB),
    _gpu("L4", "sm_89", "8.9", {
        "datasheet": "NVIDIA L4 Tensor Core GPU datasheet: 30.3 TFLOPS FP32, 242 TFLOPS FP16 "
                     "tensor with sparsity (121 dense), 300 GB/s GDDR6, boost 2040 MHz "
                     "(grokipedia.com/page/NVIDIA_L4_vs_L40S; store.sourcecode.com spec table)",
        "sms": "derived: 30.3 TFLOPS / (128 x 2 x 2.04 GHz) = 58 SMs (7,424 CUDA cores / 128)",
        "fp16_tflops": "not in the datasheet: FP16 arithmetic costed at the FP32 rate",
        "fp64_tflops": "not in the datasheet: FP64 arithmetic costed at the FP32 rate "
                       "(optimistic: Ada runs FP64 at 1/64 of FP32)",
        "l2_bytes": "48 MB: third-party databases (fpsbench.com, cputronic.com), not an "
                    "NVIDIA document",
    }, sms=58, boost_mhz=2040, dram_gbps=300, fp32_tflops=30.3, fp16_tflops=None,
        fp64_tflops=None, fp16_tensor_tflops=121, l2_bytes=48 * MIB),
    _gpu("B200", "sm_100", "10.0", {
        "datasheet": "NVIDIA HGX B200 specifications: 8 TB/s HBM3e per GPU, 2.25 PFLOPS "
                     "FP16/BF16 tensor dense (4.5 sparse), 75 TFLOPS FP32, 37 TFLOPS FP64 "
                     "(hmc-tech.com/gpus/nvidia-b200-vs-nvidia-b100; glennklockwood.com/garden/"
                     "processors/B200 transcribes the March 2024 figures 80/40 TFLOPS instead: "
                     "an uncertain figure)",
        "sms": "148 SMs: third-party database (hmc-tech.com), not an NVIDIA document",
        "boost_mhz": "1980 MHz: same database; = 75 TFLOPS / (148 x 128 x 2)",
        "fp16_tflops": "derived: 2 x FP32 (150 TFLOPS BF16/FP16 non-tensor, same database)",
        "l2_bytes": "65.5 MB: third-party database (hmc-tech.com); uncertain",
    }, sms=148, boost_mhz=1980, dram_gbps=8000, fp32_tflops=75.0, fp16_tflops=150.0,
        fp64_tflops=37.0, fp16_tensor_tflops=2250, l2_bytes=int(65.5 * MIB)),
)}

DEFAULT_GPU = "H100 SXM"
_ALIASES = {"v100": "V100 SXM2", "a100": "A100 SXM 80GB", "a100-40gb": "A100 SXM 40GB",
            "a100-80gb": "A100 SXM 80GB", "h100": "H100 SXM", "h200": "H200 SXM", "l4": "L4",
            "b200": "B200"}


def gpu(name: str) -> Gpu:
    """The table entry for `name` (exact, case-insensitive, or a short alias like `a100`)."""
    if name in GPUS:
        return GPUS[name]
    low = name.lower().replace(" ", "-").replace("_", "-")
    for n in GPUS:
        if n.lower().replace(" ", "-") == low:
            return GPUS[n]
    if low in _ALIASES:
        return GPUS[_ALIASES[low]]
    raise SiriusError(f"unknown GPU {name!r}; known: {', '.join(GPUS)} "
                      f"(aliases: {', '.join(_ALIASES)})")


_DEVICE_NAMES = (("h200", "H200 SXM"), ("h100", "H100 SXM"), ("b200", "B200"),
                 ("v100", "V100 SXM2"), ("l4", "L4"))


def for_device(name: str) -> Gpu | None:
    """The table entry of a CUDA device name (`NVIDIA H100 80GB HBM3` -> H100 SXM), or None.
    A100s: 40GB when the name says so, else 80GB. Form factors (PCIe vs SXM) are not told
    apart: the SXM entry is taken."""
    words = re.findall(r"[a-z0-9]+", name.lower())
    if "a100" in words:
        return GPUS["A100 SXM 40GB"] if any("40gb" in w for w in words) else \
            GPUS["A100 SXM 80GB"]
    for key, entry in _DEVICE_NAMES:
        if key in words:
            return GPUS[entry]
    return None
