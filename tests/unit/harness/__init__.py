"""Tests of the harness package shared by the tests, the benchmark and the chaos harness."""
