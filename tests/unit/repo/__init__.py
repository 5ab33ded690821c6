"""The repository itself: layer rules, tool scripts, test markers, the dependency lock, the build."""
