"""Schedules: initial (isl scheduler), tiling, marks, legality."""
