"""What each notebook calls: one module per notebook, one thin ``step`` delegating to its stage;
only the notebooks import this subpackage, and it may import every stage."""
