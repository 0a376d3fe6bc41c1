"""Prices: the offers table, package totals per bundle (R5) and the `calcul-forfaits` command.
Never imports the engine: a price never depends on a model."""
