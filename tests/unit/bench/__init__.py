"""Unit tests of the benchmark's pure parts (predicates, milestones, audit parsing, report, profile reduction)."""
