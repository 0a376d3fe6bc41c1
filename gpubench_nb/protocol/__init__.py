"""What is declared and audited: the experiment, the corpus ledger, acceptance, the raw CSV, the
bundle layout and its audit. Never imports torch, pandas or matplotlib (docs/ARCHITECTURE.md)."""
