"""Small shared pieces with no heavy imports: errors, clock, ids."""
