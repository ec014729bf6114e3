"""Makes ``exampleproj`` importable when pytest runs from this folder or from its parent."""
