//! A pure ZooKeeper model. (Being written: see issue 4.)
