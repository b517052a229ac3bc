"""Session memory as an event journal: events, the fold, the store seam and its stores."""
