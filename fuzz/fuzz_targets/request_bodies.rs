//! Request bodies: any bytes are read as every JSON body the API takes,
//! the way its handlers read them, without panicking.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = stratum_api::http::read_as_every_body(data);
});
