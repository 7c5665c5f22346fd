"""Guarded hunting: one allow-listed table, a required window, typed filters and aggregates (``model``), from which
the bot builds the KQL (``kql``) and the demo's SQL (``sql``); the catalog of tables and virtual columns
(``catalog``); the columns a hunt computes (``computed``). The model never writes query text: a bad column,
operator or value is an error listing what is allowed."""

from bot.sentinel.hunt.catalog import Column, Table, table_names, tables
from bot.sentinel.hunt.kql import hunt_kql
from bot.sentinel.hunt.model import OPERATORS, Hunt, operators_for, parse_hunt
from bot.sentinel.hunt.sql import hunt_sql

__all__ = ["OPERATORS", "Column", "Hunt", "Table", "hunt_kql", "hunt_sql", "operators_for", "parse_hunt",
           "table_names", "tables"]
