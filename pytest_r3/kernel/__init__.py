"""A declared kernel (``r3.kernel``) and its variants, and the lock file entry that picks
the variant plain calls run, with its one staleness rule."""
