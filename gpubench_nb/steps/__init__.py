"""What each notebook calls, side by side: one module per notebook, one thin ``step`` each.

``environment`` (00_environment), ``measure`` (10_measure), ``quality`` (20_quality),
``economics`` (30_economics), ``report`` (90_report), ``memory`` (memory_mlp). Each ``step``
delegates to the stage that owns the logic; only the notebooks import this subpackage, and it
may import every stage (docs/ARCHITECTURE.md, "Layout and import rules").
"""
