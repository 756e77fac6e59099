"""Helpers shared by the reliability tests: a scripted fault-injecting server, fake sleeps,
reply builders for both protocols, and the hypothesis profiles."""
