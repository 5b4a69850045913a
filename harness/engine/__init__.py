"""The streaming engine: call a candidate again and again and fold its output into a Summary.

* `harness.engine.draw` — `run_engine`, the loop of one stage's draw, and `CandidateFailure`;
* `harness.engine.family` — `Family`, a statistic family's record, and the protocols of its
  state and accumulator (`FamilyState`, `Accumulator`);
* `harness.engine.fold` — `Fold`, the loop of each chunk over the accumulators of the statistic
  families that apply (`Chunk`: what several of them read of a chunk), and `summarize_samples`
  for samples already in memory;
* `harness.engine.mass_bin_counters` — `MassCounters`, the lookup table for a law's mass bins;
* `harness.engine.bits` — the integer views and the poison written before each call;
* `harness.engine.caught` — the distinct warnings a draw's calls raise (`caught_warnings`);
* `harness.engine.deadline` — calling a candidate: the per-call deadline and its length (the
  fixed limit, stretched by the candidate's own `Pace`), and what it raises that is not an
  Exception (`candidate_call`, `CallTimeout`, `CandidateRaised`);
* `harness.engine.throughput` — torch's ``normal_`` on the same tensor, the speed yardstick.

The engine knows no statistic by name: the families (`harness.families`) are handed to it by the
floors above, from the checks that apply (`harness.checks.CHECKS.families`).

May import: the ground floor (`harness.summary`, `harness.key_bins`, `harness.group`,
`harness.cases`, `harness.seeds`, `harness.result`), `reference`, torch.
"""

from .bits import INT_VIEW, dtype_bits, hist_bits_for, poison_, poison_value
from .caught import caught_warnings
from .deadline import (PACE_FACTOR, SLOW_CALL_FACTOR, CallTimeout, CandidateRaised, Pace,
                       call_deadline, candidate_call, held_handlers, native_backstop, raised_text)
from .draw import (PREPARE_TIMEOUT_S, CandidateFailure, changed_facts,
                   changed_tensor, chunk_elements_for, is_budget_stop, prepare_candidate,
                   run_engine, tensor_facts)
from .family import Accumulator, Family, FamilyState
from .fold import (SLICE_ELEMENTS, Box, Chunk, Fold, fixed_sum, fixed_sum_each,
                   fixed_sum_squares, fold_order, new_summary, raw_main_bins,
                   row_hash_coefficients, standard_scale, summarize_samples)
from .settings import changed_settings, kept_settings, restore_settings, torch_settings
from .throughput import normal_throughput

__all__ = ["INT_VIEW", "dtype_bits", "hist_bits_for", "poison_", "poison_value",
           "caught_warnings", "CallTimeout",
           "CandidateRaised", "call_deadline", "candidate_call", "raised_text", "PACE_FACTOR",
           "SLOW_CALL_FACTOR", "Pace", "held_handlers", "native_backstop",
           "PREPARE_TIMEOUT_S", "CandidateFailure", "chunk_elements_for", "is_budget_stop",
           "prepare_candidate", "run_engine", "changed_facts", "changed_tensor",
           "tensor_facts", "Accumulator",
           "Family", "FamilyState", "SLICE_ELEMENTS", "Box", "Chunk", "Fold", "fixed_sum",
           "fixed_sum_each", "fixed_sum_squares", "fold_order", "new_summary", "raw_main_bins",
           "row_hash_coefficients", "standard_scale", "summarize_samples", "normal_throughput",
           "changed_settings", "kept_settings", "restore_settings", "torch_settings"]
