"""Cells: one per workflow instance, resident or hibernated, woken by alarms."""
