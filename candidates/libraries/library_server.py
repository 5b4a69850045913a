"""A child process that serves one library's truncated-normal draws to a harness process.

Some libraries cannot live in the harness's process: Keras picks its backend once, at import, from
``KERAS_BACKEND`` (the torch, jax and numpy backends cannot share a process), and paddle kills a
process that imported TensorFlow before it (silently, at ``import paddle``). Their candidates draw
in a child running this file, one child per KIND per harness process (started by
`candidates.libraries.child`). It imports only numpy and the library — never the harness — and runs
without its own folder on ``sys.path`` (that folder holds adapter modules named like the libraries).

Usage: ``library_server.py KIND READ_FD WRITE_FD`` with KIND ``keras-torch``, ``keras-jax``,
``keras-numpy`` or ``paddle``. Messages are length-prefixed pickles:

* child → parent, once: ``("ready", {"library": version, ...})``
* parent → child: a dict of call parameters (``shape``, ``dtype``, ``seed`` and the sampler's own);
  child → parent: ``("ok", dtype_name, shape, raw_bytes)`` or ``("error", exc_type, message)``.

The array goes back as the raw bytes of the library's own result, so the parent sees the bits the
library wrote (a torch bfloat16 tensor goes to numpy through float32 in keras' converter, which is
exact; paddle hands bfloat16 over as uint16 bit patterns). The child sees no CUDA device.
"""

import os
import pickle
import struct
import sys


def _read_exact(fd, n):
    chunks = []
    while n:
        chunk = os.read(fd, n)
        if not chunk:
            raise EOFError
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def receive(fd):
    (length,) = struct.unpack("<Q", _read_exact(fd, 8))
    return pickle.loads(_read_exact(fd, length))


def send(fd, message):
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    view = memoryview(struct.pack("<Q", len(data)) + data)
    while view:
        view = view[os.write(fd, view):]


def keras_sampler(backend, threads):
    """keras.random.truncated_normal(shape, mean, stddev, dtype, seed) under ``backend``."""
    os.environ["KERAS_BACKEND"] = backend
    versions = {}
    if backend == "jax":
        import jax

        # Without x64 JAX answers a float64 request in float32.
        jax.config.update("jax_enable_x64", True)
        versions["jax"] = jax.__version__
    elif backend == "torch":
        import torch

        if threads:
            torch.set_num_threads(threads)
        versions["torch"] = torch.__version__
    import keras
    import numpy as np

    versions["keras"] = keras.__version__
    versions["backend"] = keras.backend.backend()
    versions["numpy"] = np.__version__

    def draw(request):
        out = keras.random.truncated_normal(tuple(request["shape"]), mean=request["mean"],
                                            stddev=request["stddev"], dtype=request["dtype"],
                                            seed=request["seed"])
        return keras.ops.convert_to_numpy(out)

    return draw, versions


def paddle_sampler():
    """paddle.nn.init.trunc_normal_(paddle.empty(shape, dtype), mean, std, a, b), seeded by paddle.seed."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "No ccache found" from paddle's extension helper
        import paddle

    paddle.set_device("cpu")  # threads: OMP_NUM_THREADS, set by the parent

    def draw(request):
        paddle.seed(request["seed"])
        t = paddle.empty(list(request["shape"]), dtype=request["dtype"])
        paddle.nn.init.trunc_normal_(t, mean=request["mean"], std=request["std"], a=request["a"],
                                     b=request["b"])
        got = str(t.dtype).removeprefix("paddle.")
        if got != request["dtype"]:
            raise TypeError(f"paddle.empty(dtype={request['dtype']!r}) gave a {got} tensor")
        return t.numpy()  # bfloat16 comes back as its uint16 bit patterns

    return draw, {"paddlepaddle": paddle.__version__}


def main():
    kind, read_fd, write_fd = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    threads = int(os.environ.get("HARNESS_LIBRARY_THREADS", "0") or 0)
    if kind.startswith("keras-"):
        draw, versions = keras_sampler(kind.removeprefix("keras-"), threads)
    elif kind == "paddle":
        draw, versions = paddle_sampler()
    else:
        raise SystemExit(f"library_server: unknown kind {kind!r}")
    import numpy as np

    send(write_fd, ("ready", versions))
    while True:
        try:
            request = receive(read_fd)
        except EOFError:
            return
        try:
            arr = np.asarray(draw(request))
            if not arr.flags.c_contiguous:
                arr = arr.copy(order="C")  # (np.ascontiguousarray would make a 0-d array 1-d)
            name = "bfloat16" if (request["dtype"] == "bfloat16" and arr.dtype.name == "uint16") \
                else arr.dtype.name
            reply = ("ok", name, tuple(arr.shape), arr.tobytes())
        except Exception as exc:  # the library's own error goes back as data
            text = str(exc).strip().splitlines()
            reply = ("error", type(exc).__name__, text[0][:300] if text else "")
        send(write_fd, reply)


if __name__ == "__main__":
    main()
