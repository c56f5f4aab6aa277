//! The elector machine: the ZooKeeper leader-election recipe, pure.
//! (Being written: see issue 4.)
