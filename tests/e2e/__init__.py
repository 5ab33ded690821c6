"""E2e tests."""
