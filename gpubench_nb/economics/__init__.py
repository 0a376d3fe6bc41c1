"""Prices (R5): offers, package totals, the ledger, `calcul-forfaits`; never the engine."""
