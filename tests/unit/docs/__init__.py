"""The documentation checked against what it describes: README, CHANGELOG upgrade notes, the bad-input page."""
