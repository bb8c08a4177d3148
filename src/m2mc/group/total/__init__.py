"""Total order in ad hoc mode: the sequencing log (:mod:`.seqlog`, split by
concern), the total-order MOP (:mod:`.mop`) and the strategy a total-order group
instance delegates to (:mod:`.strategy`). Groups of other orders import none of it.
"""
