"""Fusion planning: regions, local and level fusion, alignment, storage splitting, wavefronts."""
