# kwiki_device.py: runs task code written for a GPU on another device (kwiki plan's trace, kwiki baseline --device cpu).
# Task files hard-code device="cuda" in factories, generators, .cuda() and .to("cuda"); on a
# machine without that device every such spelling is mapped to the target instead.
import typing

import torch

SMALLEST = 64  # a shrunk size stays at least this

_FACTORIES = ("randn", "rand", "randint", "randperm", "randn_like", "rand_like", "randint_like", "zeros", "ones", "empty",
              "full", "arange", "linspace", "logspace", "eye", "tensor", "as_tensor", "zeros_like", "ones_like", "empty_like",
              "full_like", "normal", "empty_strided", "scalar_tensor", "tril_indices", "triu_indices")


def _is_cuda(device):
    if device is None:
        return False
    if isinstance(device, torch.device):
        return device.type == "cuda"
    if isinstance(device, int) and not isinstance(device, bool):
        return True  # an ordinal means a CUDA device (only ever read from a device= argument)
    return isinstance(device, str) and device.startswith("cuda")


def map_cuda_to(target):
    """Reads every request for a CUDA device as a request for `target` ("cpu"). Idempotent."""
    if getattr(torch, "_kwiki_mapped_to", None) == target:
        return
    torch._kwiki_mapped_to = target
    fix = lambda d: target if _is_cuda(d) else d

    def wrap_factory(f):
        def factory(*args, **kwargs):
            if "device" in kwargs:
                kwargs["device"] = fix(kwargs["device"])
            return f(*args, **kwargs)
        factory.__wrapped__ = f
        return factory

    for name in _FACTORIES:
        f = getattr(torch, name, None)
        if f is not None:
            setattr(torch, name, wrap_factory(f))

    generator = torch.Generator

    class _GeneratorType(type):
        # torch.Generator stays usable as a type: in isinstance checks and in annotations such as
        # `torch.Generator | None`, which torch 2 evaluates; only the construction is redirected.
        def __call__(cls, device="cpu"):
            return generator(device=fix(device))

        def __instancecheck__(cls, obj):
            return isinstance(obj, generator)

        def __or__(cls, other):
            return typing.Union[generator, other]

        def __ror__(cls, other):
            return typing.Union[other, generator]

    class Generator(metaclass=_GeneratorType):
        pass

    torch.Generator = Generator
    to = torch.Tensor.to

    def tensor_to(self, *args, **kwargs):
        args = tuple(fix(a) if isinstance(a, (str, torch.device)) and _is_cuda(a) else a for a in args)
        if "device" in kwargs:
            kwargs["device"] = fix(kwargs["device"])
        return to(self, *args, **kwargs)

    torch.Tensor.to = tensor_to
    torch.Tensor.cuda = lambda self, *a, **k: to(self, target)
    module_to = torch.nn.Module.to

    def module_to_fixed(self, *args, **kwargs):
        args = tuple(fix(a) if isinstance(a, (str, torch.device)) and _is_cuda(a) else a for a in args)
        if "device" in kwargs:
            kwargs["device"] = fix(kwargs["device"])
        return module_to(self, *args, **kwargs)

    torch.nn.Module.to = module_to_fixed
    torch.nn.Module.cuda = lambda self, *a, **k: module_to(self, target)
    torch.cuda.synchronize = lambda *a, **k: None


def quantization_blocks(kwargs):
    """The block sizes a task declares in a list under a name with "block" in it (vLLM's block_size / block_shape
    [128, 128] of fp8 block scaling): constants of the algorithm, which the shrink leaves alone."""
    return sorted({b for d in kwargs for k, v in d.items() if "block" in k.lower() and isinstance(v, (list, tuple))
                   for b in v if isinstance(b, int) and not isinstance(b, bool) and b > 1})


def shrink_factor(kwargs):
    """A power of two that divides every size-like integer >= 128 of the kwargs and leaves each at
    least SMALLEST: relations between sizes (equal, twice, a multiple) survive the shrink, and so does a
    size's being a whole number of a declared quantization block (a reference that asserts
    hidden % 128 == 0 still runs)."""
    sizes = [v for d in kwargs for k, v in d.items()
             if isinstance(v, int) and not isinstance(v, bool) and v >= 128 and "seed" not in k.lower()]
    blocks = quantization_blocks(kwargs)

    def keeps(v, f):
        return v % f == 0 and v // f >= SMALLEST and all(v % b != 0 or (v // f) % b == 0 for b in blocks)

    s = 1
    while sizes and all(keeps(v, 2 * s) for v in sizes):
        s *= 2
    return s


def shrunk(kwargs, s):
    return {k: (v // s if isinstance(v, int) and not isinstance(v, bool) and v >= 128 and "seed" not in k.lower() else v)
            for k, v in kwargs.items()}
