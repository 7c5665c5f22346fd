"""bot/sentinel: the queries and their KQL (through Microsoft's Kusto parser), the Log Analytics backend, the contract
both backends keep, the incident writers."""
