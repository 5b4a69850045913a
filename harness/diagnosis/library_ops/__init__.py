"""The libraries' arithmetic, repeated op by op, and the laws pushed through it: what the
mechanisms enumerate to predict a library's exact law, last bits included.

* `xla_cpu`, `mlx_cpu`, `torch_cpu`, `libm` — XLA's, MLX's and torch's float32 CPU kernels and
  the C library's functions they call, step by step;
* `library_kernels` — NumPyro's, Paddle's and TensorFlow's sampling kernels built on them;
* `affine`, `uniform_bits` — the laws of a last step done in the output dtype (mean + std z,
  uniform proposals) and of an inverse CDF driven by k random bits, pushed value by value.

These are models of a library's arithmetic for naming a mechanism, never the law a sampler is
judged against. May import: `harness.families` and the floors below it, `reference`; nothing
else of `harness.diagnosis`.
"""
