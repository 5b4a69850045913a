"""Adapters for TensorFlow's truncated normals: ``tensorflow`` and ``tensorflow-param``.

* ``tensorflow`` — ``tf.random.truncated_normal(shape, mean, stddev, dtype, seed)``: no bounds
  parameter; values more than 2 stddev from the mean are "dropped and re-picked", so only cases
  whose bounds are exactly mean ± 2·std can be asked for (`common.fixed_two_sigma`; the others and
  the invalid-argument probes are skipped with the reason). Seeds: TF's stateful ops are
  reproducible from a (global, op) seed pair; each call draws a fresh 63-bit seed from the
  harness's generator, calls ``tf.random.set_seed(seed >> 31)`` (which also resets TF's per-op
  counters) and passes ``seed & 0x7FFFFFFF`` as the op seed.
* ``tensorflow-param`` — ``tf.random.stateless_parameterized_truncated_normal(shape, seed, means,
  stddevs, minvals, maxvals)``: absolute bounds; stateless, seeded with ``[seed >> 32, seed &
  0xFFFFFFFF]`` from a fresh 63-bit draw. Its dtype follows its parameters, which the adapter
  passes as tensors of the output dtype; TF registers it for half, float and double only (bfloat16
  is declared unsupported, so skipped).

TF is asked for the output dtype itself; its result is copied bit for bit (``.numpy()``) into the
torch tensor. CPU only (tensorflow-cpu). TF is imported in the harness's process on the first draw
(a few seconds, ~0.5 GB).
"""

from __future__ import annotations

import os

import torch

from candidates.libraries.common import (distribution_version, draw_seed,
                                         fixed_two_sigma, missing_reason, to_torch)
from candidates.protocol import Candidate
from reference.dtypes import dtype_name

__all__ = ["CANDIDATES", "tf_truncated_normal", "tf_parameterized_truncated_normal"]

_TF: list = []


def _tf():
    if not _TF:
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")  # TF's C++ start-up chatter
        import tensorflow as tf

        _TF.append(tf)
    return _TF[0]


def tf_truncated_normal(shape, mean, std, a, b, *, dtype, device, generator):
    """tf.random.truncated_normal(shape, mean, stddev, dtype, seed): fixed mean ± 2 stddev."""
    reason = fixed_two_sigma(mean, std, a, b)
    if reason is not None:
        raise ValueError(f"tf.random.truncated_normal cannot express this: {reason}")
    tf = _tf()
    seed = draw_seed(generator)
    tf.random.set_seed(seed >> 31)
    out = tf.random.truncated_normal(list(shape), mean=mean, stddev=std,
                                     dtype=getattr(tf, dtype_name(dtype)),
                                     seed=seed & 0x7FFFFFFF)
    return to_torch(out.numpy(), dtype, shape, "tf.random.truncated_normal").to(device)


def tf_parameterized_truncated_normal(shape, mean, std, a, b, *, dtype, device, generator):
    """tf.random.stateless_parameterized_truncated_normal with absolute bounds [a, b]."""
    tf = _tf()
    seed = draw_seed(generator)
    tf_dtype = getattr(tf, dtype_name(dtype))
    out = tf.random.stateless_parameterized_truncated_normal(
        list(shape), seed=tf.constant([seed >> 32, seed & 0xFFFFFFFF], dtype=tf.int64),
        means=tf.constant(mean, tf_dtype), stddevs=tf.constant(std, tf_dtype),
        minvals=tf.constant(a, tf_dtype), maxvals=tf.constant(b, tf_dtype))
    return to_torch(out.numpy(), dtype, shape,
                    "tf.random.stateless_parameterized_truncated_normal").to(device)


def _make(name: str, fn, dtypes=None, expresses=None):
    def factory() -> Candidate:
        return Candidate(fn, name=name, spec=name,
                         version=distribution_version("tensorflow-cpu", "tensorflow"),
                         convention="functional", dtypes=dtypes, devices=("cpu",),
                         torch_init_semantics=False, accepts_generator=True, expresses=expresses,
                         unavailable=missing_reason("tensorflow", "tensorflow-cpu"),
                         prepare=_tf)

    return factory


CANDIDATES = {
    "tensorflow": _make("tensorflow", tf_truncated_normal, expresses=fixed_two_sigma),
    "tensorflow-param": _make("tensorflow-param", tf_parameterized_truncated_normal,
                              dtypes=(torch.float64, torch.float32, torch.float16)),
}
