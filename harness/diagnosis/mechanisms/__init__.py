"""The mechanisms of the catalog, each a `harness.diagnosis.match.Mechanism`: a prediction of
the reference for one way a sampler goes wrong, tested against a Summary's `Evidence`.

One module per mechanism, or per few that read the same statistics (the bound atoms' four, the
law's shape's four, the misplaced values' three, the fine structure's two); a module may use
another's shared pieces (`bound_atoms.BINNED`, `proposals.in_dtype`). The catalog
(`harness.diagnosis.mechanism_catalog`) holds one instance of each and ranks them.

May import: `harness.diagnosis.evidence`, `harness.diagnosis.match`, `harness.diagnosis.scope`,
`harness.diagnosis.library_ops`, and the floors below `harness.diagnosis`; never the catalog.
"""
