/** The gRPC service config of sessiongate's published retry policy, as JSON. */
export declare const retryServiceConfig: {
    methodConfig: {
        name: {}[];
        retryPolicy: {
            maxAttempts: number;
            initialBackoff: string;
            maxBackoff: string;
            backoffMultiplier: number;
            retryableStatusCodes: string[];
        };
    }[];
    retryThrottling: {
        maxTokens: number;
        tokenRatio: number;
    };
};
