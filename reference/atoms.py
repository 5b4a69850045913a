"""The boundaries and atoms of a rounded law: what the bounds round to, the mass they keep, the
first and last values with mass, and, for formats of at most 16 bits, every atom.

A representable bound a owns only the half of its cell inside [a, b]; a bound that is not
representable may round to a value outside [a, b] (RN(a) < a), which still gets the mass of its
cell inside [a, b] -- or none when a is exactly its cell's upper edge, in which case the support
starts at the next value up."""

from __future__ import annotations

import functools

import numpy as np

from .cell_tables import finite_cells
from .cells import CellMeasure

__all__ = ["Atoms"]


class Atoms:
    """``rn_a``, ``rn_b`` (the bounds rounded), ``support_lo``, ``support_hi`` (smallest and
    largest value with positive mass), ``atom_a``, ``atom_b`` (P(Y = rn_a), P(Y = rn_b)), and
    for <= 16-bit formats (`enumerated`) every atom with positive mass: ``keys``, ``values``,
    ``probs``, ``log_probs``."""

    def __init__(self, cells: CellMeasure):
        self.cells = cells
        fmt = cells.fmt
        self.rn_a = cells.rn_bound(float(cells.dist.a))
        self.rn_b = cells.rn_bound(float(cells.dist.b))
        self._keys = self._values = self._probs = None
        if fmt.bits <= 16:
            self._enumerate_all()
            real = self._values[~np.isnan(self._values)]
            # Empty only when a fnuz format sends all of [a, b] to NaN.
            self.support_lo = float(real[0]) if real.size else np.nan
            self.support_hi = float(real[-1]) if real.size else np.nan
        else:
            self.support_lo = self._support_end(self.rn_a, +1)
            self.support_hi = self._support_end(self.rn_b, -1)
        self.atom_a = float(cells.atom_probs(self.rn_a))
        self.atom_b = float(cells.atom_probs(self.rn_b))

    def _support_end(self, start: float, step: int) -> float:
        cells = self.cells
        lo, hi = cells.cells(np.array([start]))
        if min(hi[0], cells.b) > max(lo[0], cells.a):
            return start
        # The bound sits exactly on the far edge of its rounding cell: the neighbour is the first
        # atom.
        nb = cells.fmt.next_up(start) if step > 0 else cells.fmt.next_down(start)
        return float(nb)

    def _enumerate_all(self) -> None:
        cells, fmt = self.cells, self.cells.fmt
        a, b = cells.a, cells.b
        keys, vals, lo, hi = finite_cells(fmt, cells.via_float32)
        i0 = int(np.searchsorted(hi, a, side="right"))
        i1 = int(np.searchsorted(lo, b, side="left"))
        k, v, cl, ch = keys[i0:i1], vals[i0:i1], lo[i0:i1], hi[i0:i1]
        p = cells.mass(cl, ch)
        pos = np.minimum(ch, b) > np.maximum(cl, a)
        k, v, cl, ch, p = k[pos], v[pos], cl[pos], ch[pos], p[pos]
        extra_k, extra_p, extra_lo, extra_hi = [], [], [], []
        for key, olo, ohi in fmt.overflow_cells(cells.via_float32):
            if min(ohi, b) > max(olo, a):
                extra_k.append(key)
                extra_p.append(float(cells.mass(olo, ohi)))
                extra_lo.append(olo)
                extra_hi.append(ohi)
        if extra_k:
            ek = np.array(extra_k, dtype=np.uint64)
            uk, inv = np.unique(ek, return_inverse=True)  # fnuz: both tails share one NaN
            up = np.bincount(inv, weights=extra_p)
            uv = fmt.values_from_keys(uk)
            k = np.concatenate([k, uk])
            v = np.concatenate([v, uv])
            p = np.concatenate([p, up])
            order = np.argsort(k, kind="stable")
            k, v, p = k[order], v[order], p[order]
        self._keys, self._values, self._probs = k, v, p
        for arr in (k, v, p):
            arr.setflags(write=False)

    @property
    def enumerated(self) -> bool:
        """Whether every atom is listed (formats of at most 16 bits)."""
        return self._values is not None

    def _need_atoms(self):
        if self._values is None:
            fmt = self.cells.fmt
            raise ValueError(
                f"{fmt.name} has 2**{fmt.bits} lattice values: its law is not enumerated; "
                "use bin_probs / hist_bin_probs / atom_probs"
            )

    @property
    def values(self) -> np.ndarray:
        """Every atom with (mathematically) positive mass, in ordered-key (= increasing) order:
        finite values, +-inf where overflow reaches them, NaN for a format's overflow NaN (fnuz).
        Atoms more than ~37 std out have probs that underflow to 0.0; see `log_probs`."""
        self._need_atoms()
        return self._values

    @property
    def probs(self) -> np.ndarray:
        """P(Y = v) for `values`."""
        self._need_atoms()
        return self._probs

    @property
    def keys(self) -> np.ndarray:
        """Ordered keys (uint64) of `values`."""
        self._need_atoms()
        return self._keys

    @functools.cached_property
    def log_probs(self) -> np.ndarray:
        """log P(Y = v) for `values`, finite even where `probs` underflows."""
        self._need_atoms()
        lo, hi = self.cells.cells(self._values)
        out = self.cells.log_mass(lo, hi)
        nan_atoms = np.isnan(self._values)
        if nan_atoms.any():
            out[nan_atoms] = np.log(self._probs[nan_atoms])
        return out
