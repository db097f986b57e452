"""Binlog positions: where reading starts (:mod:`.start`), the stop points of a run (:mod:`.points`), a
timestamp's place in the binlog (:mod:`.interval` over :mod:`.binlog_index`), the look back for an XA
PREPARE before the start (:mod:`.xa_lookback`) and archived binlog files as a source (:mod:`.archive`).
"""
