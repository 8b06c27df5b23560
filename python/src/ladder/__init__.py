"""ladder: decode attention over ring-buffer (sliding-window) and growing KV planes.

Arrays are taken in place, in float32, float16 or bfloat16: numpy or torch (or any DLPack)
arrays on the host, torch (or any DLPack) CUDA tensors on the GPU. ``ladder.ModelCache`` keeps a
whole model's planes for a batch of sequences; ``import ladder.transformers`` registers the
``"ladder"`` attention implementation with transformers; ``ladder.Engine`` is the library's
engine itself, called one layer at a time for a batch of sequences. Every error is a ``ladder.LadderError``; bad arguments are also
``ValueError`` (``ShapeError``, ``DTypeError``, ``DeviceMismatchError``, ``PositionError``,
``RouteError``), device trouble ``RuntimeError`` (``NoDeviceError``, ``DeviceError``).
"""

from . import _ladder
from ._ladder import (  # noqa: F401  (the public API)
    BLOCK_TOKENS,
    ROUTES,
    DeviceError,
    DeviceMismatchError,
    DTypeError,
    Engine,
    Geometry,
    InvalidArgumentError,
    LadderError,
    NoDeviceError,
    OutOfMemoryError,
    Plane,
    PlaneConfig,
    PlaneState,
    PositionError,
    RouteError,
    ShapeError,
    UnsupportedError,
    __version__,
    choose_route,
    cpu_threads,
    cuda_available,
    cuda_description,
    has_cuda_build,
    route_refusal,
    route_trace,
    schedule,
    set_cpu_threads,
    trace_header,
    usable_cpus,
)

__all__ = [name for name in dir(_ladder) if not name.startswith("_")] + ["__version__",
    "attend", "ModelCache", "geometry_from_config"]


def _new_output(q):
    """An uninitialised array shaped like q, in q's dtype (float32 for any other), on q's device
    and from q's library."""
    new_empty = getattr(q, "new_empty", None)
    if new_empty is not None:  # torch
        import torch

        dtype = q.dtype if q.dtype in (torch.float32, torch.float16, torch.bfloat16) else torch.float32
        return new_empty(q.shape, dtype=dtype)
    import numpy

    shape = getattr(q, "shape", None)
    if shape is None:
        raise ShapeError("q must be an array of shape (n_heads, head_dim), got %s" % type(q).__name__)
    dtype = getattr(q, "dtype", None)
    if dtype not in (numpy.float32, numpy.float16):
        dtype = numpy.float32
    return numpy.empty(shape, dtype=dtype)


def attend(route, plane, position, slot, q, k, v, out=None, device=None, stream=None):
    """Single-layer decode attention for one token through one route.

    route:    'vec', 'splitk', 'interleaved', 'staged' or 'auto' (the ladder's choice).
    plane:    a Plane that has taken this token's append: ``slot = plane.append(position)``.
              The route stores the token's K/V row itself (fused into the producer on
              'interleaved'), so do not write the row before calling.
    q, out:   (n_heads, head_dim), n_heads a multiple of the plane's n_kv_heads.
    k, v:     (n_kv_heads, head_dim), this token's activations.
              Each of q, k, v, out may be float32, float16 or bfloat16 (dtypes may differ), read
              and written in place; the routes compute in float32 (converted in C++) and out is
              rounded to its dtype (round to nearest even). out=None allocates q's dtype.
    device:   'cpu' or 'cuda'; None takes the device q lives on. A host plane with host arrays
              and device='cuda' mirrors the plane to the GPU for the call (copies); a plane
              created with device='cuda' (the library's device plane, made for n_heads query
              heads) and CUDA tensors runs without any copy.
    stream:   for CUDA tensors, the cudaStream_t (an int) that wrote them: float16/bfloat16
              conversions run on it, the call waits for it before the library's device reads
              the tensors (on its own stream), and returns once out is written. None takes
              torch's current stream when q is a torch tensor, else the default stream.
    Returns out (allocated when None).
    """
    if out is None:
        out = _new_output(q)
    _ladder._attend(route, plane, position, slot, q, k, v, out, device, _ladder._writer_stream(stream, q))
    return out


from .cache import ModelCache, geometry_from_config  # noqa: E402  (needs attend's helpers above)
