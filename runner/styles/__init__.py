"""Correct runners written in other styles than the reference: each meets the lab another way
(asyncio, a selector loop, fork and exec, ...), so that the suite is seen never to fail a correct
runner for its style. They ship with the reference, and are kept from runners under test as it is."""
