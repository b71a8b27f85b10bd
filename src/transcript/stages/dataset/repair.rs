//! Dataset repair (see below).
