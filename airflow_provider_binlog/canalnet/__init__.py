"""canal's network protocol: a server that serves destinations to canal clients (:mod:`.server`),
the entries it sends (:mod:`.entries`), ZooKeeper registration as canal servers do it
(:mod:`.cluster`), and the wire itself (:mod:`.protocol`, generated from ``proto/``)."""
