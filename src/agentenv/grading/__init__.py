"""Grading: verifiers over final state, trajectories and responses, and their aggregation."""

from agentenv.grading.aggregate import Aggregator, aggregate, aggregate_task
from agentenv.grading.score import Score

__all__ = ["Aggregator", "Score", "aggregate", "aggregate_task"]
