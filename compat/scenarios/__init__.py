"""Scenario modules; each test is one row of compat/REPORT.md."""
